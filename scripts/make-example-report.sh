#!/usr/bin/env bash
# Regenerates docs/example-report.html and its screenshot docs/example-report.png.
# Usage: scripts/make-example-report.sh [GPUSCOUT_BINARY] [RESULT.json...]
#
# Inputs, by default: the committed (git-tracked) gpuscout result files under bench/results/ measured on
# H200s, one per benchmark: for each of gemm, memory, transfer, p2p and collectives, the file with the
# most passed cases of that benchmark (a full sweep, not a re-run of two shapes), the newest of those
# (provenance.created_utc) when several tie; for serve, the same per model/TP for the step cases
# (decode, prefill, static) and per model/TP/scenario for the load runs. The script prints what it
# picked. Each picked file goes to the report holding only the records it was picked for (a copy under
# a temporary bench/results/, so the report names the committed file), so a file picked for transfer
# does not add its older memory sweep to the memory chart. When no such file exists, the hand-written
# fixtures under tests/data/results/ are used and the report says so in a banner.
#
# The report carries an advice section: `gpuscout advise` on the default workload
# (data/workloads/chat-70b-slo.toml), calibrated by the picked non-serve files (--calibration).
#
# The screenshot needs Debian's chromium (scripts/install-deps.sh installs it); without it only the
# HTML is written. Needs python3 (for reading the result files) and git (to list committed files).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/gpuscout}
[ $# -gt 0 ] && shift
[ -x "$bin" ] || { echo "make-example-report: no gpuscout binary at $bin (build first, or pass its path)" >&2; exit 1; }
workload=data/workloads/chat-70b-slo.toml
[ -f "$workload" ] || { echo "make-example-report: default workload $workload is missing" >&2; exit 1; }

root=$PWD
bin=$(realpath "$bin")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# advise and report run in $tmp, where bench/results/ holds the picked files; data/ and tests/ link to
# the repository's, so the workload and fixture paths read as in the repository.
ln -s "$root/data" "$tmp/data"
ln -s "$root/tests" "$tmp/tests"

inputs=()
for f in "$@"; do
  [ -f "$f" ] || { echo "make-example-report: result file $f does not exist" >&2; exit 1; }
  inputs+=("$(realpath "$f")")
done
calibration=()
notes=()
if [ ${#inputs[@]} -eq 0 ]; then
  # Writes the picked files, each holding only the records of what it was picked for, under
  # $tmp/bench/results/ (same names, so the report names them as the committed files), and
  # "<calibrate|report> bench/results/<name>" lines to $tmp/picked; the selection goes to stderr.
  mkdir -p "$tmp/bench/results"
  git ls-tree -r -z --name-only HEAD -- bench/results/ >"$tmp/committed"
  python3 - "$tmp" <<'PY'
import json, os, sys

GPU = "H200-SXM-141GB"
tmp = sys.argv[1]
with open(os.path.join(tmp, "committed")) as fh:
    files = [f for f in fh.read().split("\0") if f.endswith(".json")]


def group_of(record):
    """The benchmark, or for serve the model/TP step cases or the model/TP/scenario load run."""
    bench = record.get("benchmark", "")
    if bench != "serve":
        return bench
    parts = record.get("key", "").split("/")  # serve/<kind>/<model>/tp<N>[/<scenario>/...]
    if len(parts) < 4:
        return None  # serve/copy/<size>: the run's own copy reference, kept with its serve run
    if parts[1] == "load" and len(parts) > 4:
        return f"serve {parts[2]} {parts[3]} load {parts[4]}"
    return f"serve {parts[2]} {parts[3]} steps"


docs, best = {}, {}  # best: group -> (passed cases, created, path)
for path in sorted(files):
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as e:
        print(f"make-example-report: skipping {path}: {e}", file=sys.stderr)
        continue
    if not isinstance(doc, dict) or doc.get("kind") != "bench" or not isinstance(doc.get("records"), list):
        continue  # not a gpuscout bench result (a PyTorch reference, a text log)
    gpus = [g.get("spec_name") for g in doc.get("gpus", [])]
    if not gpus or any(g != GPU for g in gpus):
        continue
    docs[path] = doc
    created = doc.get("provenance", {}).get("created_utc", "")
    cases = {}
    for r in doc["records"]:
        group = group_of(r)
        if group and r.get("outcome") == "passed":
            cases.setdefault(group, set()).add(r.get("key"))
    for group, keys in cases.items():
        cand = (len(keys), created, path)
        if group not in best or cand[:2] > best[group][:2]:
            best[group] = cand

picked = {}  # path -> groups
for group in sorted(best):
    n, created, path = best[group]
    print(f"make-example-report: {group}: {path} ({n} passed cases, {created})", file=sys.stderr)
    picked.setdefault(path, set()).add(group)
with open(os.path.join(tmp, "picked"), "w") as out:
    for path in sorted(picked):
        groups = picked[path]
        serve = any(g.startswith("serve ") for g in groups)
        doc = dict(docs[path])
        doc["records"] = [r for r in doc["records"]
                          if group_of(r) in groups or (serve and r.get("benchmark") == "serve" and group_of(r) is None)]
        with open(os.path.join(tmp, "bench", "results", os.path.basename(path)), "w") as fh:
            json.dump(doc, fh, indent=1)
        role = "report" if all(g.startswith("serve ") for g in groups) else "calibrate"
        print(role, "bench/results/" + os.path.basename(path), file=out)
PY
  while read -r role path; do
    inputs+=("$path")
    [ "$role" = calibrate ] && calibration+=(--calibration "$path")
  done <"$tmp/picked"
  if [ ${#inputs[@]} -gt 0 ]; then
    notes+=(--note "Example report, built by scripts/make-example-report.sh from result files measured on NVIDIA H200 GPUs (bench/results/): per benchmark the committed file with the most passed cases (the newest of those), holding only the records of that benchmark. Advice: gpuscout advise on data/workloads/chat-70b-slo.toml, calibrated by those files.")
  else
    inputs=(tests/data/results/fixture-run-a.json)
    notes+=(--note "EXAMPLE WITH FIXTURE DATA: every number in this report is hand-written test data (tests/data/results/), not a measurement.")
  fi
fi

echo "make-example-report: advise on $workload ${calibration[*]}" >&2
# Through PATH, so the advice's recorded command line reads "gpuscout ...", not this machine's build path.
bindir=$(dirname "$bin")
(cd "$tmp" && PATH="$bindir:$PATH" "$(basename "$bin")" --no-history advise "$workload" --top 5 --out chat-70b-slo-advice.json "${calibration[@]}" \
  >advice.txt)
echo "make-example-report: from ${inputs[*]}"
(cd "$tmp" && PATH="$bindir:$PATH" "$(basename "$bin")" report "${inputs[@]}" --advice chat-70b-slo-advice.json "${notes[@]}" \
  --title "gpuscout example report" -o "$root/docs/example-report.html")

chromium_bin=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium_bin" ]; then
  echo "make-example-report: chromium not found; docs/example-report.png not updated" >&2
  exit 0
fi
profile="$tmp/profile"
mkdir -p "$profile"
"$chromium_bin" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync "--host-resolver-rules=MAP * ~NOTFOUND" --user-data-dir="$profile" \
  --hide-scrollbars --window-size=1200,2400 --screenshot="$PWD/docs/example-report.png" \
  "file://$PWD/docs/example-report.html" 2>/dev/null
echo "make-example-report: wrote docs/example-report.html and docs/example-report.png"

#!/usr/bin/env bash
# Regenerates docs/example-report.html and its screenshot docs/example-report.png.
# Usage: scripts/make-example-report.sh [GPUSCOUT_BINARY] [RESULT.json...]
# Inputs, by default: the measured H200 result files listed below (bench/results/); when none of them
# exists, the hand-written fixtures under tests/data/results/, and the report says so in a banner.
# The screenshot needs Debian's chromium (scripts/install-deps.sh installs it); without it only the
# HTML is written.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/gpuscout}
[ $# -gt 0 ] && shift
[ -x "$bin" ] || { echo "make-example-report: no gpuscout binary at $bin (build first, or pass its path)" >&2; exit 1; }

# Measured on H200s: one GPU, or two for p2p, the 2-GPU run and the 70B TP2 serve run (see bench/results/
# and bench/NOTES.md). One file per benchmark family, so the charts are not crowded with repeated runs of
# the same case; the serve file's own copy and GEMM reference records do add a series to those charts.
measured=(
  bench/results/gemm-h200-20261130-standard.json
  bench/results/h200-memory-transfer-side-by-side-20261130.json
  bench/results/h200x2-p2p-20261130.json
  bench/results/h200x2-single-20261130.json
  bench/results/h200-serve-llama-3.1-8b-20261130.json
  bench/results/h200x2-serve-llama-3.1-8b-peak-20261130.json
  bench/results/h200x2-serve-llama-3.1-70b-tp2-peak-20261130.json
)
inputs=("$@")
notes=()
if [ ${#inputs[@]} -eq 0 ]; then
  for f in "${measured[@]}"; do [ -f "$f" ] && inputs+=("$f"); done
  if [ ${#inputs[@]} -gt 0 ]; then
    notes+=(--note "Example report, built by scripts/make-example-report.sh from result files measured on NVIDIA H200 GPUs (bench/results/).")
  else
    inputs=(tests/data/results/fixture-run-a.json)
    notes+=(--note "EXAMPLE WITH FIXTURE DATA: every number in this report is hand-written test data (tests/data/results/), not a measurement.")
  fi
fi
echo "make-example-report: from ${inputs[*]}"
"$bin" report "${inputs[@]}" "${notes[@]}" --title "gpuscout example report" -o docs/example-report.html

chromium_bin=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium_bin" ]; then
  echo "make-example-report: chromium not found; docs/example-report.png not updated" >&2
  exit 0
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$chromium_bin" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync "--host-resolver-rules=MAP * ~NOTFOUND" --user-data-dir="$profile" \
  --hide-scrollbars --window-size=1200,2400 --screenshot="$PWD/docs/example-report.png" \
  "file://$PWD/docs/example-report.html" 2>/dev/null
echo "make-example-report: wrote docs/example-report.html and docs/example-report.png"

#!/usr/bin/env bash
# Usage: render_report.sh GPUSCOUT OUTPUT_DIR RESULT.json...
# Generates an HTML report and opens it in headless Chromium (Debian's `chromium`): the page must
# render with no console message (the report has no script, so any message is an error or a blocked
# load), request nothing over the network (checked in the HTML, in Chromium's net log and in its
# log), and its DOM must hold every section. Leaves report.html, report.png (screenshot), dom.html,
# chromium.log and netlog.json in OUTPUT_DIR. Exit 77 (skipped) when chromium is not installed.
set -u
bin=$1
outdir=$2
shift 2
chromium_bin=""
for c in chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null 2>&1; then
    chromium_bin=$(command -v "$c")
    break
  fi
done
if [ -z "$chromium_bin" ]; then
  echo "SKIP: chromium is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }

rm -rf "$outdir"
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
report="$outdir/report.html"
fail=0
problem() { echo "FAIL: $*"; fail=1; }

"$bin" report "$@" --title "gpuscout report (browser test)" -o "$report" || { echo "FAIL: gpuscout report failed"; exit 1; }

# 1. Nothing in the HTML could make a request: no src/href/url()/@import pointing off the page.
if grep -Eio "(src|href|action|data|poster)[[:space:]]*=[[:space:]]*[\"']?[[:space:]]*(https?:|//|ftp:)[^\"' >]*|url\([^)]*\)|@import[^;]*" "$report"; then
  problem "the report references external resources (above)"
fi
grep -qi "<script" "$report" && problem "the report contains a <script>"

# Hermetic: no DNS resolution at all, whatever the page or the browser tries.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
  --disable-component-update --disable-sync --disable-default-apps --disable-extensions --mute-audio
  "--host-resolver-rules=MAP * ~NOTFOUND" --user-data-dir="$profile" --enable-logging=stderr --v=0
  --window-size=1200,2400)
url="file://$report"

# 2. Screenshot, with the net log and the console log.
timeout 120 "$chromium_bin" "${flags[@]}" --log-net-log="$outdir/netlog.json" --screenshot="$outdir/report.png" \
  "$url" >"$outdir/chromium-screenshot.out" 2>"$outdir/chromium.log"
rc=$?
[ $rc -eq 0 ] || problem "chromium --screenshot exited with $rc"
[ -s "$outdir/report.png" ] || problem "no screenshot written"

# 3. The DOM after rendering.
timeout 120 "$chromium_bin" "${flags[@]}" --dump-dom "$url" >"$outdir/dom.html" 2>>"$outdir/chromium.log"
rc=$?
[ $rc -eq 0 ] || problem "chromium --dump-dom exited with $rc"
for needle in 'id="summary"' 'id="provenance"' 'id="definitions"' '<svg'; do
  grep -qF "$needle" "$outdir/dom.html" || problem "rendered DOM lacks $needle"
done

# 4. Console messages (errors, CSP violations, blocked loads) are logged as CONSOLE lines.
if grep -E "CONSOLE|Uncaught|Refused to|Content Security Policy" "$outdir/chromium.log"; then
  problem "console messages while rendering (above)"
fi
# Network attempts Chromium logs (failed loads, DNS) name a URL scheme.
if grep -E "net::ERR_|Failed to load resource" "$outdir/chromium.log"; then
  problem "network errors while rendering (above)"
fi

# 5. The net log: every URL request must be the report itself or one of Chromium's own background
#    services (updates, time, accounts), which the page cannot cause.
python3 - "$outdir/netlog.json" "$url" <<'PY' || fail=1
import json, re, sys
path, page = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8", errors="replace").read().rstrip().rstrip(",")
if not text.endswith("}"):
    text += "]}"  # a net log cut short by the browser's exit is missing its closing brackets
try:
    log = json.loads(text)
    urls = {e["params"]["url"] for e in log.get("events", []) if isinstance(e.get("params"), dict) and "url" in e["params"]}
except ValueError:
    urls = set(re.findall(r'"url":"([^"]*)"', text))
browser_own = re.compile(r"^https?://(clients\d*\.google\.com|update\.googleapis\.com|accounts\.google\.com|"
                         r"[a-z0-9-]+\.gvt1\.com|optimizationguide-pa\.googleapis\.com|"
                         r"safebrowsing[a-z0-9-]*\.googleapis\.com)/")
bad = sorted(u for u in urls if u != page and not browser_own.match(u))
for u in bad:
    print(f"FAIL: the page requested {u}")
print(f"net log: {len(urls)} URLs, {len(bad)} from the page")
sys.exit(1 if bad else 0)
PY

if [ $fail -ne 0 ]; then
  echo "--- outputs in $outdir"
  exit 1
fi
echo "ok: rendered $report without console messages or network requests; screenshot $outdir/report.png"
exit 0

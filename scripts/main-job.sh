#!/usr/bin/env bash
# The README's main job: which GPUs, how many, at what cost, for the embedded default workload
# (data/workloads/chat-70b-slo.toml), as a table on stdout and an HTML report.
# With a local GPU (`gpuscout devices` lists one) it first runs `gpuscout bench --quick`; that result
# file calibrates the advice for this GPU type and goes into the report. Without one, the advice works
# from the embedded data alone and says, per GPU type, which efficiencies are measured (the committed
# H200 results) and which rest on the spec sheet.
# Usage: scripts/main-job.sh [OUTPUT_DIR] [advise flags...]   ($GPUSCOUT: the binary, default build/gpuscout)
set -euo pipefail
bin=${GPUSCOUT:-./build/gpuscout}
out=${1:-main-job}
shift || true
mkdir -p "$out"
calibration=()
results=()
if [ -n "$("$bin" devices --format csv 2>/dev/null)" ]; then
  "$bin" bench --quick --out "$out/bench.json"
  calibration=(--calibration "$out/bench.json")
  results=("$out/bench.json")
else
  echo "main-job: no local GPU; advising from the embedded data (spec sheet + committed H200 calibration)" >&2
fi
"$bin" advise --workload chat-70b-slo --top 5 --out "$out/advice.json" "${calibration[@]}" "$@"
"$bin" report "${results[@]}" --advice "$out/advice.json" --title "gpuscout: chat-70b-slo" -o "$out/report.html"

#!/usr/bin/env bash
# Latency vs throughput of the serving engine on one H200 (kind nvidia-h200), two ways on one engine each:
#   1. a Concurrency sweep: a closed loop of N requests in flight, N = CONCURRENCY (default
#      1,2,4,8,16,32,64,128; vLLM's benchmark_serving --max-concurrency, genai-perf --concurrency);
#   2. a Server sweep: Poisson arrivals at each rate of RATES (default 8,16,32,48,64,80 requests/s);
#   3. (SWEEPS includes "spread") the Concurrency sweep again with lengths spread by --range-ratio
#      RANGE_RATIO (default 0.5: 256..768 in, 64..192 out), so the clients fall out of phase;
# each point p99 TTFT <= 1 s and p99 TPOT <= 50 ms (the find-peak runs' bounds), 512/128 tokens,
# >= REQUESTS measured requests and >= DURATION s; then one HTML report of them all.
# SWEEPS: which to run (default "concurrency rates"); WEIGHTS=fp8 runs them with FP8 projection
# weights (--weights fp8; output files get a -fp8 suffix).
# Usage, from the repository root there:  DIST=.devdist bash bench/run_serve_sweep_h200.sh
# Writes under $OUT: serve_concurrency.json, serve_rates.json, serve_concurrency_spread.json,
# serve_sweep_report.html, summary.txt, env.txt, logs.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
logs=$(mktemp -d)
write_env "$OUT/env.txt"
"$bin" --version >>"$OUT/env.txt" 2>&1
tags="--tags machine:${MACHINE:-nvidia-h200},script:run_serve_sweep_h200"
model=${MODEL:-llama-3.1-8b}
bounds=(--ttft-ms 1000 --tpot-ms 50 --requests "${REQUESTS:-48}" --duration-s "${DURATION:-10}"
  --weights "${WEIGHTS:-bf16}")
suffix=""
[ "${WEIGHTS:-bf16}" = bf16 ] || suffix="-${WEIGHTS}"

sweeps=" ${SWEEPS:-concurrency rates} "
concurrency=${CONCURRENCY:-1,2,4,8,16,32,64,128}
if [[ $sweeps == *" concurrency "* ]]; then
  run_logged "$logs" "$OUT/summary.txt" concurrency 420 "$bin" -v bench --only serve/load --model "$model" \
    --concurrency "$concurrency" "${bounds[@]}" --out "$OUT/serve_concurrency$suffix.json" $tags
fi
if [[ $sweeps == *" rates "* ]]; then
  run_logged "$logs" "$OUT/summary.txt" rates 300 "$bin" -v bench --only serve/load --model "$model" \
    --rate "${RATES:-8,16,32,48,64,80}" "${bounds[@]}" --out "$OUT/serve_rates$suffix.json" $tags
fi
if [[ $sweeps == *" spread "* ]]; then
  run_logged "$logs" "$OUT/summary.txt" spread 420 "$bin" -v bench --only serve/load --model "$model" \
    --concurrency "$concurrency" --range-ratio "${RANGE_RATIO:-0.5}" "${bounds[@]}" \
    --out "$OUT/serve_concurrency_spread$suffix.json" $tags
fi
grep -h "serve/load" "$logs"/*.txt | tee -a "$OUT/summary.txt"

files=()
for f in "$OUT/serve_concurrency$suffix.json" "$OUT/serve_rates$suffix.json" "$OUT/serve_concurrency_spread$suffix.json"; do
  [ -f "$f" ] && files+=("$f")
done
[ ${#files[@]} -gt 0 ] && "$bin" report "${files[@]}" --title "gpuscout serve: latency vs throughput on one H200" \
  -o "$OUT/serve_sweep_report$suffix.html" >>"$OUT/summary.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$logs" .

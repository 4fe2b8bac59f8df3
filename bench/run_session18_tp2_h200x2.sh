#!/usr/bin/env bash
# Session 18 end, on 2x H200: the engine checks at TP1/TP2, the 70B TP2 serve cases and a concurrency
# sweep (1,4,16,64 in flight; p99 TTFT <= 2 s, TPOT <= 100 ms). Needs $DIST/infer_engine_test. Writes under $OUT.
set -uo pipefail
source bench/dist_env.sh
mkdir -p "$OUT"
{ date -u +%FT%TZ; "$bin" --version; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv; } > "$OUT/tp2-checks.txt"
timeout 200 "$DIST/infer_engine_test" 2>&1 | grep -vE "^ok " | tail -25 >> "$OUT/tp2-checks.txt"; echo "infer_engine_test exit ${PIPESTATUS[0]}" >> "$OUT/tp2-checks.txt"
tail -4 "$OUT/tp2-checks.txt"
tags="--tags machine:nvidia-h200-x2,script:session18-tp2"
timeout 200 "$bin" -v bench --only serve --gpus 0,1 --tp 2 --model llama-3.1-70b --out "$OUT/serve70b.json" $tags > "$OUT/serve70b.txt" 2>&1; echo "serve70b exit $?"
grep -E "^\[gpu" "$OUT/serve70b.txt" | tail -12
timeout 200 "$bin" -v bench --only serve/load --gpus 0,1 --tp 2 --model llama-3.1-70b --concurrency 1,4,16,64 --ttft-ms 2000 --tpot-ms 100 --requests 32 --duration-s 10 --out "$OUT/serve70b_concurrency.json" $tags > "$OUT/serve70b_concurrency.txt" 2>&1; echo "concurrency exit $?"
grep -h "in flight" "$OUT/serve70b_concurrency.txt" | tail -6

#!/usr/bin/env bash
# Session 19, one H200: the slot fix of session 18 on a GPU. Six infer_engine_test runs at once
# (the pipelined-vs-synchronous checks failed in 2 of 6 before it), then the serve run beside
# PyTorch (FIND_PEAK=0 bench/run_serve_h200.sh). Needs $DIST/infer_engine_test. Writes under $OUT.
set -uo pipefail
source bench/dist_env.sh
ab_begin engine-checks  # $OUT, $log with the environment header, and $runs for the runs' output
"$bin" --version >>"$log"
for i in 1 2 3 4 5 6; do
  (timeout 300 "$DIST/infer_engine_test" >"$runs/run$i.txt" 2>&1; echo "exit $?" >>"$runs/run$i.txt") &
done
wait
for i in 1 2 3 4 5 6; do
  echo "== run $i: $(tail -1 "$runs/run$i.txt"), $(grep -c '^ok ' "$runs/run$i.txt") ok lines"
  grep -E "FAIL|pipelined preempt" "$runs/run$i.txt" | head -8
done >>"$log"
cat "$log"
FIND_PEAK=0 bash bench/run_serve_h200.sh

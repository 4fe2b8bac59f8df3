#!/usr/bin/env bash
# What a user does first on a GPU machine, on the current build: the README's main job
# (scripts/main-job.sh: `bench --quick`, then `advise` calibrated by it, then the HTML report), then the
# default `gpuscout bench` (standard mode, every benchmark this machine supports) and its report, each
# timed. Writes under $OUT: main-job/{bench.json,advice.json,report.html}, bench.json, report.html and
# product-check.txt (commands, exit codes, wall times, stdout and stderr).
set -uo pipefail
source bench/dist_env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
log="$OUT/product-check.txt"
write_env "$log"
export GPUSCOUT_HISTORY_DB=$(mktemp -d)/history.db
step() {
  local name=$1 limit=$2 s rc
  shift 2
  echo "== $name: $*" >>"$log"
  s=$(date +%s%N)
  timeout "$limit" "$@" >>"$log" 2>&1
  rc=$?
  echo "== $name: exit $rc, $((($(date +%s%N) - s) / 1000000)) ms" | tee -a "$log"
}
echo "# build $("$bin" --version | head -1)" >>"$log"
step main-job 240 env GPUSCOUT="$bin" scripts/main-job.sh "$OUT/main-job"
step bench 420 "$bin" bench --out "$OUT/bench.json" --tags "machine:nvidia-h200,script:run_product_check_h200"
step report 60 "$bin" report "$OUT/bench.json" -o "$OUT/report.html"
step history 30 "$bin" history list
cut -c1-250 "$log" | tail -150

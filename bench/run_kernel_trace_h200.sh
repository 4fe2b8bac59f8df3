#!/usr/bin/env bash
# Session 26: where a decode step's time goes, kernel by kernel, inside the step (the GPU machine has
# no Nsight Systems). Builds bench/probe/kernel_trace.cpp (a CUPTI injection library) against the
# CUPTI found there, runs `infer_engine_test --bench MODEL` once untraced and then traced with the
# cuBLASLt configuration search off and on (GPUSCOUT_GEMM_SEARCH) and with FP8 weights, and cuts each trace into steps with
# bench/probe/kernel_trace_summary.py.
# Usage (repository root on the GPU machine): DIST=.devdist MODEL=llama-3.1-8b [RUNS="search0 ties"]
#   [SKIP_UNTRACED=1] [NO_RAW=1] bash bench/run_kernel_trace_h200.sh
# RUNS (default "search0 search1 fp8"): search0/search1 (GPUSCOUT_GEMM_SEARCH), fp8 (--fp8), ties
# (GPUSCOUT_GEMM_LT_TIES=1; the others run with it off), pairs0/pairs1 (the search on, the pair decode
# attention kernel withheld from / offered to the start-up tuning: GPUSCOUT_DECODE_PAIR_KERNEL). Session 27 also ran prefetch2 (GPUSCOUT_L2_PREFETCH=2,
# code reverted; commit 2972bb1 has it).
# Writes $OUT/kernel-trace.txt (log, untraced and traced bench lines), $OUT/kernel-trace-<run>.txt
# (summaries) and $OUT/kernel-trace.tar.gz (per-position CSVs of
# every step group) and the raw traces, gzipped, where each is under 15 MB.
set -u
source bench/dist_env.sh
model=${MODEL:-llama-3.1-8b}
ab_begin kernel-trace
raw=$(mktemp -d)

sites=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
header=$(find /usr/local/cuda* /usr/include /opt $sites -name cupti_activity.h 2>/dev/null | head -1)
# The CUPTI of the header's toolkit (Nsight Compute carries an older one).
library=$(ls "$(dirname "$header")"/../lib/libcupti.so* /usr/local/cuda*/extras/CUPTI/lib64/libcupti.so* \
  /usr/local/cuda*/targets/*/lib/libcupti.so* 2>/dev/null | head -1)
{
  echo "== CUPTI: header $header, library $library"
  [ -n "$header" ] && [ -n "$library" ] || { echo "no CUPTI found"; exit 1; }
  inc=$(dirname "$header")
  krec=$(grep -ho 'CUpti_ActivityKernel[0-9]\+;' "$inc"/cupti_activity*.h | tr -d ';' | sort -V | tail -1)
  mrec=$(grep -ho 'CUpti_ActivityMemcpy[0-9]\+;' "$inc"/cupti_activity*.h | tr -d ';' | sort -V | tail -1)
  echo "== record types $krec $mrec"
  g++ -O2 -std=c++17 -shared -fPIC -DKREC="$krec" -DMREC="$mrec" -I"$inc" bench/probe/kernel_trace.cpp \
    "$library" -Wl,-rpath,"$(dirname "$library")" -o "$runs/libktrace.so" 2>&1 | tail -20
  [ -e "$runs/libktrace.so" ] || { echo "the tracer did not build"; exit 1; }
  pattern="device|start-up|decode batch|graph replays|pipelined|prefill|ktrace|skipped|rror|CUDA"
  echo "== untraced, GPUSCOUT_GEMM_SEARCH=0"
  [ -n "${SKIP_UNTRACED:-}" ] || timeout 300 "$DIST/infer_engine_test" --bench "$model" 2>&1 | grep -E "$pattern" | cut -c1-300
  for run in ${RUNS:-search0 search1 fp8}; do
    search=0 ties=0 pair=${GPUSCOUT_DECODE_PAIR_KERNEL:-1} flags=()
    [ "$run" = search1 ] && search=1
    [ "$run" = fp8 ] && flags=(--fp8)
    [ "$run" = ties ] && ties=1
    case $run in pairs0 | pairs1) search=1 pair=${run#pairs} ;; esac
    echo "== traced $run: GPUSCOUT_GEMM_SEARCH=$search GPUSCOUT_GEMM_LT_TIES=$ties GPUSCOUT_DECODE_PAIR_KERNEL=$pair ${flags[*]}"
    GPUSCOUT_GEMM_SEARCH=$search GPUSCOUT_GEMM_LT_TIES=$ties GPUSCOUT_DECODE_PAIR_KERNEL=$pair \
      CUDA_INJECTION64_PATH="$runs/libktrace.so" KTRACE_OUT="$runs/trace-$run.csv" \
      timeout 300 "$DIST/infer_engine_test" --bench "$model" "${flags[@]}" 2>&1 | grep -E "$pattern|^  gemm " |
      cut -c1-300
    python3 bench/probe/kernel_trace_summary.py "$runs/trace-$run.csv" --min-steps 32 \
      --csv-prefix "$runs/positions-$run" >"$OUT/kernel-trace-$run.txt" 2>&1
    echo "summary: exit $?, $(wc -l <"$OUT/kernel-trace-$run.txt") lines"
    gzip -1 "$runs/trace-$run.csv"
    mv "$runs/trace-$run.csv.gz" "$raw/"
  done
  rm -f "$runs/libktrace.so"
  ls -la "$runs" "$raw"
} >>"$log" 2>&1
# The raw traces come back where each is under the 16 MiB a file may have.
# NO_RAW=1 keeps them there (a call may bring back only 8 files).
[ -n "${NO_RAW:-}" ] || find "$raw" -name '*.gz' -size -15M -exec cp {} "$OUT/" \;
ab_end kernel-trace

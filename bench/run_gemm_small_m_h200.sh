#!/usr/bin/env bash
# The small-m decode GEMM (backends/cuda/infer/gemm_small_m.cu) on the device machine, one call:
#   1. infer_gemm_test --bench: the kernel and GemmRunner against the CPU reference, then per
#      Llama-3.1-8B shape and rows 8/16/32/64 the kernel against cuBLASLt's best candidate and the
#      weight bytes at the measured copy rate;
#   2. the direct kernel checks again under compute-sanitizer memcheck;
#   3. (unless ENGINE=0) infer_engine_test: the engine with the kernel against the CPU reference on
#      the tiny model, then --bench llama-3.1-8b without the kernel (GPUSCOUT_SMALL_M_GEMM=0: tune
#      offers only cuBLASLt) and with it, same binary: GEMM choices and the batch 1/8/32 decode step.
# Usage (repository root there; DIST holds the stripped test binaries and lib/ with libfmt,
# libspdlog and libtomlplusplus):  DIST=.devdist-gemm bash bench/run_gemm_small_m_h200.sh [OUTDIR]
#   4. (unless NCU=0) Nsight Compute on the gate_up shape at 32 rows: each variant and cuBLASLt.
# Writes: env.txt, gemm.txt, sanitizer.txt, engine.txt (before, then after), ncu.txt.
set -u
out=${1:-${OUT:-out}}
mkdir -p "$out"
DIST=${DIST:-.devdist-gemm}
export LD_LIBRARY_PATH="$(pwd)/$DIST/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{
  echo "date: $(date -u +%FT%TZ)"; git log -1 --format='commit %h %s' 2>/dev/null; uname -a
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv
} >"$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 200 "$DIST/infer_gemm_test" --bench >"$out/gemm.txt" 2>&1
echo "infer_gemm_test --bench exit code: $?" >>"$out/gemm.txt"
grep -E "FAIL|PASSED|FAILED|tune:|error" "$out/gemm.txt" | head -40
sed -n '/# bench/,$p' "$out/gemm.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv >>"$out/env.txt" 2>&1
if command -v compute-sanitizer >/dev/null; then
  timeout 60 compute-sanitizer --tool memcheck --print-limit 20 "$DIST/infer_gemm_test" --kernel-only >"$out/sanitizer.txt" 2>&1
  echo "compute-sanitizer memcheck exit code: $?" >>"$out/sanitizer.txt"
  tail -3 "$out/sanitizer.txt"
fi
# Nsight Compute on the gate_up shape at 32 rows: each variant and cuBLASLt's first candidate.
if [ "${NCU:-1}" != 0 ] && command -v ncu >/dev/null; then
  timeout 90 ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section WarpStateStats "$DIST/infer_gemm_test" --profile >"$out/ncu.txt" 2>&1
  echo "ncu exit code: $?" >>"$out/ncu.txt"
  grep -E "small_m|gemm|nvjet|DRAM Throughput|Duration|Memory Throughput|Registers Per|Achieved Occupancy|exit code" \
    "$out/ncu.txt" | head -80
fi
if [ "${ENGINE:-1}" != 0 ]; then
  echo "## after: $DIST/infer_engine_test (tiny model against the CPU reference)" >>"$out/engine.txt"
  timeout 60 "$DIST/infer_engine_test" >>"$out/engine.txt" 2>&1
  echo "exit code: $?" >>"$out/engine.txt"
  for small_m in 0 1; do
    echo "## GPUSCOUT_SMALL_M_GEMM=$small_m $DIST/infer_engine_test --bench llama-3.1-8b" >>"$out/engine.txt"
    GPUSCOUT_SMALL_M_GEMM=$small_m timeout 60 "$DIST/infer_engine_test" --bench llama-3.1-8b >>"$out/engine.txt" 2>&1
    echo "exit code: $?" >>"$out/engine.txt"
  done
  grep -E "^## |m=(16|32) |decode batch|exit code|PASS|FAIL" "$out/engine.txt"
fi

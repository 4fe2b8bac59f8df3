#!/usr/bin/env bash
# The train step with FP8 linear GEMMs (--train-precision fp8) against BF16 on the H200 machine, in
# one short device call: the GPU correctness test (BF16 and FP8 gradients vs the CPU reference, plain
# and under compute-sanitizer), then `gpuscout bench --only train-step` on 4 Llama-3.1-8B layers at
# 1 x 2048 and 4 x 4096 tokens, BF16 then FP8, each with its own 8192^3 GEMM reference.
# Made here (build machine), then run with `run` carrying .devdist-train2:
#   cmake --build build-train2 -j2 --target gpuscout train_step_test
#   scripts/make-device-dist.sh build-train2 .devdist-train2 && strip .devdist-train2/gpuscout
#   cp build-train2/tests/gpu/train_step_test .devdist-train2/ && strip .devdist-train2/train_step_test
#   run: DIST=.devdist-train2 bash bench/run_train_step_fp8_h200.sh   (carry [".devdist-train2"])
# Writes under $OUT: env.txt, test.txt, train-step-bf16.json/.txt, train-step-fp8.json/.txt.
set -u
DIST=${DIST:-.devdist-train2}
. bench/dist_env.sh
out=${OUT:-out}
mkdir -p "$out"
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv
  "$bin" --version
} >"$out/env.txt" 2>&1

s=$(date +%s)
timeout 60 "$DIST/train_step_test" >"$out/test.txt" 2>&1
echo "test exit $? ($(($(date +%s) - s)) s)" >>"$out/test.txt"
tail -1 "$out/test.txt"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
s=$(date +%s)
echo "== compute-sanitizer --tool memcheck train_step_test" >>"$out/test.txt"
timeout 30 "$sanitizer" --tool memcheck --error-exitcode 3 "$DIST/train_step_test" 2>&1 | grep -E "ERROR SUMMARY|Invalid|PASS|FAIL" | head -20 >>"$out/test.txt"
echo "compute-sanitizer memcheck exit ${PIPESTATUS[0]} ($(($(date +%s) - s)) s)" >>"$out/test.txt"
tail -1 "$out/test.txt"

# The committed BF16 cases (bench/results/h200-train-step-20261130.json): 1 x 2048 and 4 x 4096.
for p in bf16 fp8; do
  suffix=$([ "$p" = fp8 ] && echo -fp8)
  only="train-step/verify,train-step/gemm,train-step/llama-3.1-8b$suffix/l4/b1_s2048,train-step/llama-3.1-8b$suffix/l4/b4_s4096"
  s=$(date +%s)
  timeout 70 "$bin" bench --only "$only" --model llama-3.1-8b --train-layers 4 --micro-batch 1,4 --seq 2048,4096 \
    --train-precision "$p" -v --out "$out/train-step-$p.json" >"$out/train-step-$p.txt" 2>&1
  echo "bench $p exit $? ($(($(date +%s) - s)) s)" >>"$out/train-step-$p.txt"
  grep -E "train-step/|exit" "$out/train-step-$p.txt" | tail -6
done

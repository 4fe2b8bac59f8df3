#!/usr/bin/env bash
# The train-step benchmark on the H200 machine, in one device call: the GPU correctness test (plain
# and under compute-sanitizer), `gpuscout bench --only train-step` on Llama-3.1-8B layers, a case
# that does not fit (its recorded reason), and the PyTorch reference of the same shapes.
# Made here (build machine), then run with `run` carrying .devdist-train:
#   cmake --build build-train -j2 --target gpuscout train_step_test
#   scripts/make-device-dist.sh build-train .devdist-train && strip .devdist-train/gpuscout
#   cp build-train/tests/gpu/train_step_test .devdist-train/ && strip .devdist-train/train_step_test
#   run: DIST=.devdist-train bench/run_train_step_h200.sh   (carry [".devdist-train"])
# Writes under $OUT: env.txt, test.txt, sanitizer.txt, train-step.json/.txt, train-step-nofit.json,
# torch.jsonl.
set -u
DIST=${DIST:-.devdist-train}
. bench/dist_env.sh
out=${OUT:-out}
mkdir -p "$out"
LAYERS=${LAYERS:-4}
BATCHES=${BATCHES:-1,4}
SEQS=${SEQS:-2048,4096}
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv
  "$bin" --version
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} >"$out/env.txt" 2>&1

s=$(date +%s)
"$DIST/train_step_test" >"$out/test.txt" 2>&1
echo "test exit $? ($(($(date +%s) - s)) s)" >>"$out/test.txt"
tail -1 "$out/test.txt"

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
s=$(date +%s)
timeout 150 "$sanitizer" --tool memcheck --error-exitcode 3 "$DIST/train_step_test" >"$out/sanitizer.txt" 2>&1
echo "compute-sanitizer memcheck exit $? ($(($(date +%s) - s)) s)" >>"$out/sanitizer.txt"
tail -1 "$out/sanitizer.txt"

s=$(date +%s)
"$bin" bench --only train-step --model llama-3.1-8b --train-layers "$LAYERS" --micro-batch "$BATCHES" --seq "$SEQS" \
  -v --out "$out/train-step.json" >"$out/train-step.txt" 2>&1
echo "bench exit $? ($(($(date +%s) - s)) s)" >>"$out/train-step.txt"
tail -12 "$out/train-step.txt"

# All 32 layers at 4 x 4096 tokens need far more than 141 GB: recorded as skipped, with the reason.
"$bin" bench --only train-step/llama-3.1-8b/l32/b4_s4096 --model llama-3.1-8b --train-layers 32 --micro-batch 4 \
  --seq 4096 --out "$out/train-step-nofit.json" >"$out/train-step-nofit.txt" 2>&1
echo "nofit exit $?" >>"$out/train-step-nofit.txt"
tail -3 "$out/train-step-nofit.txt"

s=$(date +%s)
python3 bench/train_step_reference_torch.py --layers "$LAYERS" --micro-batch "$BATCHES" --seq "$SEQS" \
  >"$out/torch.jsonl" 2>"$out/torch.err"
echo "torch exit $? ($(($(date +%s) - s)) s)"
cat "$out/torch.jsonl"
tail -3 "$out/torch.err"

#!/usr/bin/env bash
# Prefill attention on the device machine: the kernel checks of infer_kernels_test (all of them),
# its prefill timings, PyTorch's SDPA on the same shape in the same call, the kernel's SASS spill
# count; with "full", also compute-sanitizer memcheck of the checks (prefill kernels
# instrumented) and the engine's 8k prefill (infer_engine_test --bench llama-3.1-8b).
# Usage (repository root on the GPU machine): bench/run_prefill_attention_h200.sh [quick|full|memcheck]
#   memcheck: only compute-sanitizer memcheck of the checks, prefill kernels instrumented.
#   Binaries: .devdist-attn/{infer_kernels_test,infer_engine_test} with .devdist-attn/lib (fmt,
#   spdlog, toml++), built on the build machine (build-train2) and carried: copy both binaries from
#   build-train2/tests/gpu, strip them, copy the libfmt/libspdlog/libtomlplusplus that ldd names.
# Writes under $OUT: env.txt, test.txt (checks and all timings), bench.txt, sass.txt[, engine.txt, sanitizer.txt].
set -u
mode=${1:-quick}
out=${OUT:-out}
mkdir -p "$out"
dist=.devdist-attn
export LD_LIBRARY_PATH="$(pwd)/$dist/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{
  echo "date: $(date -u +%FT%TZ)"; git log -1 --format='commit %h %s' 2>/dev/null; uname -a
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv
} >"$out/env.txt" 2>&1
# compute-sanitizer memcheck of the checks, only the prefill kernels instrumented (the other
# kernels run uninstrumented, which keeps it short).
memcheck() {
  timeout 150 compute-sanitizer --tool memcheck --kernel-name kns=prefill_kernel --print-limit 20 \
    "$dist/infer_kernels_test" >"$out/sanitizer.txt" 2>&1
  echo "compute-sanitizer memcheck (prefill kernels) exit code: $?" >>"$out/sanitizer.txt"
  grep -E "PASSED|FAILED" "$out/sanitizer.txt"
  tail -3 "$out/sanitizer.txt"
}
if [ "$mode" = memcheck ]; then
  memcheck
  exit 0
fi
# --bench runs every check first, then the timings.
timeout 240 "$dist/infer_kernels_test" --bench >"$out/test.txt" 2>&1
echo "infer_kernels_test --bench exit code: $?" | tee -a "$out/test.txt"
grep -iE "prefill attention" "$out/test.txt" | grep -v "^#" | head -40
grep -E "FAIL|failed" "$out/test.txt" | head -20
{
  grep -A6 "## prefill attention" "$out/test.txt"
  timeout 100 python3 bench/infer_attention_reference.py 2>&1
} >"$out/bench.txt"
cat "$out/bench.txt"
if command -v cuobjdump >/dev/null; then
  cuobjdump -res-usage "$dist/infer_kernels_test" 2>/dev/null | grep -A1 "prefill_kernel" >"$out/sass.txt"
  cuobjdump -sass "$dist/infer_kernels_test" 2>/dev/null |
    awk '/Function : .*prefill_kernel/ {f = $3} /Function : / && !/prefill_kernel/ {f = ""}
         f != "" && /HMMA/ {h[f]++} f != "" && /LDSM/ {l[f]++} f != "" && /(LDL|STL)/ {s[f]++}
         END {for (k in h) print k, "HMMA", h[k], "LDSM", l[k], "LDL/STL", s[k] + 0}' >>"$out/sass.txt"
  cat "$out/sass.txt"
fi
if [ "$mode" = full ]; then
  memcheck
  timeout 120 "$dist/infer_engine_test" --bench llama-3.1-8b >"$out/engine.txt" 2>&1
  echo "infer_engine_test exit code: $?" >>"$out/engine.txt"
  grep -E "prefill [0-9]+ tokens|exit code" "$out/engine.txt"
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv >>"$out/env.txt" 2>&1

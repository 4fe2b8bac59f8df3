#!/usr/bin/env bash
# Single-GPU measurements on the device machine, with PyTorch references timed in the same call.
# Usage (repository root on the GPU machine):  bench/run_h200_single.sh [OUTDIR]
#   OUTDIR defaults to $OUT (the device tool's output folder) or ./out.
#   Uses build-cuda/dist/gpuscout (+ build-cuda/dist/lib) when carried from the build machine and it
#   runs there; else builds with cmake into build-device/.
#   ONLY (default memory,transfer), MODE (default standard: "", or --quick/--full), GEMM=1 adds a
#   quick BF16 GEMM run when the binary has the gemm benchmark.
# Writes: gpuscout-h200.json (the tool's result), bench-summary.txt, bench-stderr.txt, devices.txt,
# torch-ref.json, env.txt, ratios.txt; prints the ratio table last.
set -u
out=${1:-${OUT:-out}}
mkdir -p "$out"
root=$(pwd)
only=${ONLY:-memory,transfer}
mode=${MODE:-}

bin=""
if [ -x build-cuda/dist/gpuscout ]; then
  export LD_LIBRARY_PATH="$root/build-cuda/dist/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  if build-cuda/dist/gpuscout --version >/dev/null 2>"$out/bench-stderr.txt"; then
    bin=build-cuda/dist/gpuscout
  else
    echo "carried binary does not run here:"; cat "$out/bench-stderr.txt"
  fi
fi
if [ -z "$bin" ]; then
  echo "building on the device machine"
  cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DGPUSCOUT_BUILD_TESTS=OFF >"$out/build.txt" 2>&1 &&
    cmake --build build-device -j"$(nproc)" >>"$out/build.txt" 2>&1 && bin=build-device/gpuscout
  [ -n "$bin" ] || { tail -30 "$out/build.txt"; exit 1; }
fi

{
  echo "date: $(date -u +%FT%TZ)"; "$bin" --version; uname -a
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,pstate,persistence_mode --format=csv
  nvidia-smi topo -m 2>/dev/null | head -5
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  ls /sys/devices/system/node | grep node
} >"$out/env.txt" 2>&1

"$bin" devices >"$out/devices.txt" 2>&1
"$bin" devices --format json >>"$out/devices.txt" 2>&1

result="$out/gpuscout-h200.json"
# shellcheck disable=SC2086
"$bin" -v bench $mode --only "$only" --out "$result" --tags machine:nvidia-h200,script:run_h200_single \
  >"$out/bench-summary.txt" 2>>"$out/bench-stderr.txt"
echo "gpuscout bench exit code: $?" >>"$out/bench-stderr.txt"
if [ "${GEMM:-0}" = 1 ] && "$bin" bench --list 2>/dev/null | grep -q '^gemm'; then
  "$bin" -v bench --quick --only gemm/bf16 --out "$out/gpuscout-h200-gemm.json" >>"$out/bench-summary.txt" \
    2>>"$out/bench-stderr.txt"
fi

# PyTorch references, same machine, same call: median of 20 CUDA-event timings after 5 warm-ups.
python3 - "$out/torch-ref.json" <<'PY' 2>&1 | tail -5
import json, sys, torch
def median_s(fn, warm=5, iters=20):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    ts.sort(); return ts[len(ts) // 2]
ref = {}
n = 4 * 2**30  # 4 GiB per array
a = torch.rand(n // 4, device="cuda"); b = torch.empty_like(a); c = torch.rand(n // 4, device="cuda")
ref["copy_4GiB_gbps"] = 2 * n / median_s(lambda: b.copy_(a)) / 1e9          # read + write
ref["add_triad_4GiB_gbps"] = 3 * n / median_s(lambda: torch.add(a, c, alpha=3.0, out=b)) / 1e9
ref["sum_read_4GiB_gbps"] = n / median_s(lambda: a.sum()) / 1e9
del a, b, c
m = 512 * 2**20
h = torch.empty(m, dtype=torch.uint8, pin_memory=True); h.fill_(7)
d = torch.empty(m, dtype=torch.uint8, device="cuda")
ref["h2d_pinned_512MiB_gbps"] = m / median_s(lambda: d.copy_(h, non_blocking=True)) / 1e9
ref["d2h_pinned_512MiB_gbps"] = m / median_s(lambda: h.copy_(d, non_blocking=True)) / 1e9
ref["torch"] = torch.__version__
json.dump(ref, open(sys.argv[1], "w"), indent=1)
print(json.dumps(ref))
PY

python3 - "$result" "$out/torch-ref.json" <<'PY' | tee "$out/ratios.txt"
import json, sys
res = json.load(open(sys.argv[1]))
try: torch = json.load(open(sys.argv[2]))
except Exception: torch = {}
recs = {r["key"]: r for r in res["records"]}
def metric(key, name):
    r = recs.get(key)
    if not r: return None
    for m in r["metrics"]:
        if m["name"] == name: return m["value"]
    return None
# (label, our key, our metric, reference figures file value, torch key)
rows = [
  ("HBM copy 4GiB (r+w)", "memory/copy/4GiB", "bandwidth", 4034, "copy_4GiB_gbps"),
  ("CE D2D copy 4GiB (r+w)", "memory/ce_copy/4GiB", "bandwidth", 4195, "copy_4GiB_gbps"),
  ("HBM triad 4GiB", "memory/triad/4GiB", "bandwidth", 4364, "add_triad_4GiB_gbps"),
  ("HBM read 4GiB", "memory/read/4GiB", "bandwidth", 4434, "sum_read_4GiB_gbps"),
  ("HBM write 4GiB", "memory/write/4GiB", "bandwidth", None, None),
  ("H2D pinned CE 512MiB", "transfer/h2d_ce_pinned/512MiB", "bandwidth", 55.3, "h2d_pinned_512MiB_gbps"),
  ("D2H pinned CE 512MiB", "transfer/d2h_ce_pinned/512MiB", "bandwidth", 55.3, "d2h_pinned_512MiB_gbps"),
  ("H2D while D2H, CE", "transfer/bidir_ce_pinned/512MiB", "h2d_bandwidth", None, None),
  ("bidir CE total", "transfer/bidir_ce_pinned/512MiB", "total_bandwidth", None, None),
  ("H2D SM 512MiB", "transfer/h2d_sm_pinned/512MiB", "bandwidth", None, None),
  ("D2H SM 512MiB", "transfer/d2h_sm_pinned/512MiB", "bandwidth", None, None),
  ("H2D pageable 512MiB", "transfer/h2d_ce_pageable/512MiB", "bandwidth", None, None),
  ("host latency SM (us)", "transfer/latency_sm_pinned", "latency", 1.18, None),
]
print(f"{'quantity':26} {'gpuscout':>9} {'ref file':>9} {'ratio':>6} {'torch':>9} {'ratio':>6}")
for label, key, name, ref, tk in rows:
    v = metric(key, name)
    t = torch.get(tk) if tk else None
    f = lambda x: f"{x:9.1f}" if isinstance(x, (int, float)) else f"{'-':>9}"
    r1 = f"{v / ref:6.3f}" if v and ref else f"{'-':>6}"
    r2 = f"{v / t:6.3f}" if v and t else f"{'-':>6}"
    print(f"{label:26} {f(v)} {f(ref)} {r1} {f(t)} {r2}")
bad = [r["key"] for r in res["records"] if r["outcome"] != "passed"]
print("records:", len(res["records"]), "not passed:", bad if bad else "none", "complete:", res["complete"])
PY

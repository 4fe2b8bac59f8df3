#!/usr/bin/env bash
# Multi-GPU measurements on the 2x H200 device machine (kind nvidia-h200-x2): topology, p2p,
# NCCL collectives in one process and under mpirun, the multi-GPU tests, and PyTorch's copy_
# between the GPUs timed in the same call; prints a ratio table last.
# Usage (repository root on the GPU machine):  bench/run_h200_x2.sh [OUTDIR]
#   Binary: DIST (bench/dist_env.sh: made here by scripts/make-device-dist.sh, carried).
#   NCCL_NVLS_ENABLE and the other multicast-off variables are left as the machine sets them.
# Writes under OUTDIR: x2-single.json, x2-mpi.json, x2-p2p.json (the tool's results), topo.txt,
# env.txt, gpu-tests.txt, torch-ref.json, logs.txt, ratios.txt.
set -u
out=${1:-${OUT:-out}}
mkdir -p "$out"
root=$(pwd)
log="$out/logs.txt"
: >"$log"

source bench/dist_env.sh
"$bin" --version >>"$log" 2>&1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { mpirun -np 2 --bind-to none -x LD_LIBRARY_PATH -x PATH "$@"; }

{
  echo "date: $(date -u +%FT%TZ)"; "$bin" --version; uname -a
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv
  nvidia-smi topo -m
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
  mpirun --version 2>&1 | head -2
  ldd "$bin" | grep -E 'nccl|mpi'
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())'
} >"$out/env.txt" 2>&1

"$bin" topo >"$out/topo.txt" 2>&1
"$bin" topo --format json >>"$out/topo.txt" 2>&1

# Multi-GPU tests (same checks as ctest -L gpu runs).
have_mpi=OFF
ldd "$bin" | grep -q libmpi && have_mpi=ON
for t in topo p2p collectives watchdog mpi mpi_dead_rank; do
  s=$(date +%s)
  r=$(tests/gpu/check_multi_gpu.sh "$bin" $t $have_mpi 2>&1 | tail -4 | tr '\n' ' ')
  echo "gpu.multi_$t: exit ${PIPESTATUS[0]} ($(( $(date +%s) - s )) s): $r" >>"$out/gpu-tests.txt"
done

ops=all_reduce,all_gather,reduce_scatter,alltoall,sendrecv,broadcast
sizes=8,1KiB,32KiB,1MiB,16MiB,64MiB,256MiB,1GiB,4GiB,8GiB
common=(--only collectives --coll-ops $ops --coll-sizes $sizes --coll-dtypes float)
timeout 150 "$bin" -v bench "${common[@]}" --out "$out/x2-single.json" --tags machine:nvidia-h200-x2,mode:single_process \
  >"$out/single-summary.txt" 2>>"$log"
echo "single exit $?" >>"$log"
timeout 150 mpirun -np 2 --bind-to none -x LD_LIBRARY_PATH -x PATH "$bin" -v bench "${common[@]}" --out "$out/x2-mpi.json" --tags machine:nvidia-h200-x2,mode:mpi \
  >"$out/mpi-summary.txt" 2>>"$log"
echo "mpi exit $?" >>"$log"
"$bin" -v bench --only collectives --coll-ops all_reduce --coll-sizes 1GiB,8GiB --coll-dtypes bf16 \
  --out "$out/x2-bf16.json" >/dev/null 2>>"$log"
timeout 120 "$bin" -v bench --only p2p --out "$out/x2-p2p.json" --tags machine:nvidia-h200-x2 >"$out/p2p-summary.txt" 2>>"$log"
echo "p2p exit $?" >>"$log"

# PyTorch copy_ between the GPUs, same call: 1 GiB, one way and both ways at once.
python3 - "$out/torch-ref.json" <<'PY' 2>&1 | tail -3
import json, sys, time, torch
n = 1 << 30
a0 = torch.empty(n, dtype=torch.uint8, device="cuda:0").random_(0, 255)
a1 = torch.empty(n, dtype=torch.uint8, device="cuda:1").random_(0, 255)
b0 = torch.empty_like(a0); b1 = torch.empty_like(a1)
s0 = torch.cuda.Stream(device=0); s1 = torch.cuda.Stream(device=1)
def sync():
    torch.cuda.synchronize(0); torch.cuda.synchronize(1)
def timed(fn, reps=10, samples=7):
    for _ in range(3): fn()
    sync(); ts = []
    for _ in range(samples):
        t = time.perf_counter()
        for _ in range(reps): fn()
        sync(); ts.append((time.perf_counter() - t) / reps)
    ts.sort(); return ts[len(ts) // 2]
def one_way():
    with torch.cuda.stream(s0): b1.copy_(a0, non_blocking=True)
def both():
    with torch.cuda.stream(s0): b1.copy_(a0, non_blocking=True)
    with torch.cuda.stream(s1): b0.copy_(a1, non_blocking=True)
ref = {"torch": torch.__version__}
ref["copy_0to1_1GiB_gbps"] = n / timed(one_way) / 1e9
ref["copy_both_1GiB_total_gbps"] = 2 * n / timed(both) / 1e9
assert torch.equal(b1.to("cuda:0"), a0)
json.dump(ref, open(sys.argv[1], "w"), indent=1); print(json.dumps(ref))
PY

python3 - "$out" <<'PY' | tee "$out/ratios.txt"
import json, os, sys
out = sys.argv[1]
def load(name):
    try: return json.load(open(os.path.join(out, name)))
    except Exception: return None
def metric(res, key, name):
    if not res: return None
    for r in res["records"]:
        if r["key"] == key:
            for m in r["metrics"]:
                if m["name"] == name: return m["value"]
    return None
single, mpi, p2p, bf16, torch = load("x2-single.json"), load("x2-mpi.json"), load("x2-p2p.json"), load("x2-bf16.json"), load("torch-ref.json") or {}
rows = []  # label, value, reference, reference source
for mode, res, ar8 in (("1proc", single, 345), ("mpi", mpi, 348)):
    c = "collectives/{}/float/{}/{}"
    rows += [
      (f"all_reduce 8GiB busbw oop [{mode}]", metric(res, c.format("all_reduce", "oop", "8GiB"), "busbw"), ar8, "nccl-tests"),
      (f"all_reduce 8GiB busbw inpl [{mode}]", metric(res, c.format("all_reduce", "inplace", "8GiB"), "busbw"), ar8 + 1 if mode == "1proc" else ar8, "nccl-tests"),
      (f"all_reduce 1GiB busbw oop [{mode}]", metric(res, c.format("all_reduce", "oop", "1GiB"), "busbw"), 327, "nccl-tests -g2"),
      (f"all_gather 8GiB busbw oop [{mode}]", metric(res, c.format("all_gather", "oop", "8GiB"), "busbw"), 314, "nccl-tests -g2"),
      (f"all_gather 8GiB busbw inpl [{mode}]", metric(res, c.format("all_gather", "inplace", "8GiB"), "busbw"), 336, "nccl-tests -g2"),
      (f"reduce_scatter 8GiB busbw oop [{mode}]", metric(res, c.format("reduce_scatter", "oop", "8GiB"), "busbw"), 307, "nccl-tests -g2"),
      (f"reduce_scatter 8GiB inpl [{mode}]", metric(res, c.format("reduce_scatter", "inplace", "8GiB"), "busbw"), 290, "nccl-tests -g2"),
      (f"alltoall 8GiB busbw oop [{mode}]", metric(res, c.format("alltoall", "oop", "8GiB"), "busbw"), 339, "nccl-tests -g2"),
      (f"sendrecv 8GiB busbw oop [{mode}]", metric(res, c.format("sendrecv", "oop", "8GiB"), "busbw"), 366, "nccl-tests -g2"),
      (f"all_reduce 8B time us [{mode}]", metric(res, c.format("all_reduce", "oop", "8B"), "time"), 20 if mode == "1proc" else 10, "nccl-tests"),
      (f"all_reduce 32KiB time us [{mode}]", metric(res, c.format("all_reduce", "oop", "32KiB"), "time"), 20 if mode == "1proc" else 10, "nccl-tests"),
    ]
rows.append(("all_reduce bf16 8GiB busbw oop [1proc]", metric(bf16, "collectives/all_reduce/bf16/oop/8GiB", "busbw"), 350, "nccl-tests -g2"))
rows += [
  ("p2p ce_write 0->1 512MiB", metric(p2p, "p2p/ce_write/gpu0_to_gpu1/512MiB", "bandwidth"), 396, "nvbandwidth"),
  ("p2p ce_read 0->1 512MiB", metric(p2p, "p2p/ce_read/gpu0_to_gpu1/512MiB", "bandwidth"), 394, "nvbandwidth"),
  ("p2p ce_bidir total 512MiB", metric(p2p, "p2p/ce_bidir/gpu0_to_gpu1/512MiB", "total_bandwidth"), 783, "nvbandwidth"),
  ("p2p sm_write 0->1 512MiB", metric(p2p, "p2p/sm_write/gpu0_to_gpu1/512MiB", "bandwidth"), 370, "nvbandwidth"),
  ("p2p sm_read 0->1 512MiB", metric(p2p, "p2p/sm_read/gpu0_to_gpu1/512MiB", "bandwidth"), None, ""),
  ("p2p sm_bidir total 512MiB", metric(p2p, "p2p/sm_bidir/gpu0_to_gpu1/512MiB", "total_bandwidth"), None, ""),
  ("p2p latency_sm us", metric(p2p, "p2p/latency_sm/gpu0_reads_gpu1", "latency"), 0.83, "nvbandwidth"),
  ("p2p ce_write vs torch copy_ 1GiB", metric(p2p, "p2p/ce_write/gpu0_to_gpu1/512MiB", "bandwidth"), torch.get("copy_0to1_1GiB_gbps"), "PyTorch same call"),
  ("p2p ce_bidir vs torch both ways", metric(p2p, "p2p/ce_bidir/gpu0_to_gpu1/512MiB", "total_bandwidth"), torch.get("copy_both_1GiB_total_gbps"), "PyTorch same call"),
]
print(f"{'quantity':40} {'gpuscout':>9} {'ref':>9} {'ratio':>6}  ref source")
for label, v, ref, src in rows:
    f = lambda x: f"{x:9.2f}" if isinstance(x, (int, float)) else f"{'-':>9}"
    r = f"{v / ref:6.3f}" if v and ref else f"{'-':>6}"
    print(f"{label:40} {f(v)} {f(ref)} {r}  {src}")
for name, res in (("single", single), ("mpi", mpi), ("p2p", p2p), ("bf16", bf16)):
    if res:
        bad = [r["key"] for r in res["records"] if r["outcome"] != "passed"]
        print(f"{name}: records {len(res['records'])}, not passed: {bad[:6] if bad else 'none'}, complete {res['complete']}")
    else:
        print(f"{name}: no result file")
PY
cat "$out/gpu-tests.txt"
# At most 8 files come back from the device machine: the JSON results and ratios stay, the text
# logs go into one archive.
(cd "$out" && tar czf logs.tar.gz --ignore-failed-read logs.txt env.txt topo.txt gpu-tests.txt torch-ref.json \
  ./*-summary.txt; rm -f logs.txt env.txt topo.txt gpu-tests.txt ./*-summary.txt)

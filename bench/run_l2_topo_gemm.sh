#!/usr/bin/env bash
# One call on nvidia-h200-x2 (2026-11-30, issues 3 and 4): the memory benchmark's L2..HBM sweep
# (L2-resident sizes repeated inside the kernel), `gpuscout topo` on two NVLinked GPUs (far end
# from nvmlDeviceGetNvLinkRemoteDeviceType), and BF16/TF32 GEMM at 4096^3 against PyTorch, run
# A-B-A-B on one cuBLASLt build so the order and the card's power state show in the spread; the
# cuBLASLt log of PyTorch's calls says which kernel PyTorch runs.
# Usage, from the repository root there:  bash bench/run_l2_topo_gemm.sh   (DIST: bench/dist_env.sh)
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
use_torch_cublaslt
tags="--tags machine:nvidia-h200-x2,script:run_l2_topo_gemm"
{
  date -u +%FT%TZ; "$bin" --version
  nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,clocks.sm,power.draw,power.limit --format=csv
  nvidia-smi topo -m; nvidia-smi nvlink -s -i 0 | head -4
  "$bin" topo; "$bin" topo --format json
} >"$OUT/topo.txt" 2>&1

"$bin" -v bench --full --only memory --gpus 0 --no-history --out "$OUT/memory.json" $tags \
  >"$OUT/memory.txt" 2>"$OUT/memory.log"
echo "memory exit $?" >>"$OUT/memory.log"
tests/gpu/check_bench.sh "$bin" memory >>"$OUT/memory.log" 2>&1; echo "check_bench memory exit $?" >>"$OUT/memory.log"

# p2p and transfer share record_case (case_outcome.hpp) since this run: their quick cases on both GPUs.
"$bin" -v bench --quick --only transfer,p2p --gpus 0,1 --no-history --out "$OUT/p2p-transfer.json" $tags \
  >/dev/null 2>"$OUT/p2p.log"; echo "p2p/transfer exit $?" >>"$OUT/p2p.log"

g=(--only gemm --gpus 0 --gemm-sizes 4096 --precisions bf16,tf32 --gemm-m none --no-history $tags)
t=(--sizes 4096 --precisions bf16,tf32 --layouts tn)
for round in a b; do
  "$bin" -v bench "${g[@]}" --out "$OUT/gemm-$round.json" >/dev/null 2>>"$OUT/gemm.log"
  CUDA_VISIBLE_DEVICES=0 python3 bench/gemm_reference.py "${t[@]}" >"$OUT/torch-$round.json" 2>>"$OUT/gemm.log"
done
# Which kernel PyTorch's matmul runs (cuBLAS and cuBLASLt API logs, a few calls).
CUDA_VISIBLE_DEVICES=0 CUBLASLT_LOG_LEVEL=2 CUBLASLT_LOG_FILE="$OUT/lt.log" CUBLAS_LOGINFO_DBG=1 \
  CUBLAS_LOGDEST_DBG="$OUT/cublas.log" python3 - <<'PY' >>"$OUT/gemm.log" 2>&1
import torch
for dt, tf32 in ((torch.bfloat16, False), (torch.float32, True)):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    x = torch.randn(4096, 4096, device="cuda", dtype=dt); w = torch.randn(4096, 4096, device="cuda", dtype=dt)
    for _ in range(2): y = torch.matmul(x, w.t())
    torch.cuda.synchronize()
PY
(cd "$OUT" && tar czf logs.tar.gz --ignore-failed-read memory.txt memory.log gemm.log lt.log cublas.log p2p.log &&
  rm -f memory.txt memory.log gemm.log lt.log cublas.log p2p.log)

grep -E "NV[0-9]|domain|Domain|direct|nvswitch|virtualized|assumed" "$OUT/topo.txt" | head -20
python3 - "$OUT/memory.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{'memory record':32} {'GB/s':>8} {'passes':>6} {'l2':>3}  outcome")
for r in d["records"]:
    bw = next((m["value"] for m in r.get("metrics", []) if m["name"] == "bandwidth"), float("nan"))
    p = r["params"]
    print(f"{r['key']:32} {bw:8.0f} {p.get('passes_per_launch', '-'):>6} {'y' if p.get('l2_resident') else 'n':>3}  {r['outcome']}")
PY
python3 - "$OUT/p2p-transfer.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [r["key"] + ": " + r["outcome"] for r in d["records"] if r["outcome"] not in ("passed", "not_supported")]
print(f"p2p/transfer: {len(d['records'])} records, not passed: {bad or 'none'}")
PY
for round in a b; do python3 bench/gemm_compare.py "$OUT/gemm-$round.json" "$OUT/torch-$round.json"; done

#!/usr/bin/env python3
"""PyTorch references for the memory and transfer benchmarks, timed on the same GPU in the same call.

Copy, add (triad) and sum (read) over 4 GiB arrays, bytes read + written as gpuscout counts them;
pinned 512 MiB host<->device copies. Median of 20 CUDA-event timings after 5 warm-ups.

  python3 bench/memory_reference.py OUT.json
"""
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

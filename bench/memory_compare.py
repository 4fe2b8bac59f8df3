#!/usr/bin/env python3
"""Ratio table: gpuscout memory/transfer records against the reference figures of
../shared/reference/h200-reference-figures.md and bench/memory_reference.py's PyTorch timings.

  python3 bench/memory_compare.py gpuscout.json torch-ref.json
"""
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

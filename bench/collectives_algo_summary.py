#!/usr/bin/env python3
"""Tables for bench/run_collectives_algo_h200x2.sh: what NCCL chose per collective and size, the
all_reduce small-message times of repeated runs, and the plugin on/off A/B.
Usage: collectives_algo_summary.py DIR   (DIR holds algo-*.json, lat-*.json, ab-*.json)"""
import glob
import json
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def records(doc):
    return [r for r in doc.get("records", []) if r.get("benchmark") == "collectives"]


def metric(rec, name):
    for m in rec.get("metrics", []):
        if m["name"] == name:
            return m
    return None


def label(rec):
    p = rec["params"]
    return f'{p["op"]} {rec["key"].split("/")[-1]} {"in" if p["in_place"] else "oop"}'


def algo_tables(d):
    docs = {m: os.path.join(d, f"algo-{m}.json") for m in ("single", "mpi")}
    docs = {m: load(p) for m, p in docs.items() if os.path.exists(p)}
    if not docs:
        return
    print("## What NCCL chose (profiler plugin, verification call)\n")
    modes = list(docs)
    print("| case | " + " | ".join(f"{m}: algorithm / protocol / channels" for m in modes) + " |")
    print("|---|" + "---|" * len(modes))
    by_mode = {m: {r["key"]: r for r in records(doc)} for m, doc in docs.items()}
    keys = [r["key"] for r in records(docs[modes[0]])]
    for k in keys:
        cells = []
        for m in modes:
            r = by_mode[m].get(k)
            if r is None:
                cells.append("-")
                continue
            e = r.get("extra", {})
            cells.append(f'{e.get("algorithm")} / {e.get("protocol")} / {e.get("channels")}')
        print(f"| {label(by_mode[modes[0]][k])} | " + " | ".join(cells) + " |")
    reasons = {r["extra"].get("nccl_choice_unknown_reason") for doc in docs.values() for r in records(doc)}
    for reason in sorted(x for x in reasons if x):
        print(f"\nunknown because: {reason}")
    for m, doc in docs.items():
        src = {r["extra"].get("nccl_choice_source") for r in records(doc)}
        print(f"\n{m}: source {sorted(x for x in src if x)}; NCCL {doc['provenance'].get('software', {}).get('nccl')}")
    print()


def latency_tables(d):
    groups = {
        "one process": sorted(glob.glob(os.path.join(d, "lat-single-*.json"))),
        "mpirun -np 2": sorted(glob.glob(os.path.join(d, "lat-mpi-*.json"))),
        "one process, --quick": sorted(glob.glob(os.path.join(d, "lat-quick-single-*.json"))),
    }
    print("## all_reduce float, out of place: time per op (us), median of samples [min-max of samples] (samples)\n")
    for name, files in groups.items():
        if not files:
            continue
        runs = [{r["key"]: r for r in records(load(f)) if not r["params"]["in_place"]} for f in files]
        print(f"### {name}\n")
        print("| size | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " | mean of runs | runs max/min |")
        print("|---|" + "---|" * (len(runs) + 2))
        for key in runs[0]:
            cells, medians = [], []
            for run in runs:
                r = run.get(key)
                t = metric(r, "time") if r else None
                if t is None:
                    cells.append("-")
                    continue
                sp = t.get("spread") or {}
                medians.append(t["value"])
                cells.append(f'{t["value"]:.2f} [{sp.get("min", 0):.2f}-{sp.get("max", 0):.2f}] ({t.get("samples")})')
            ratio = max(medians) / min(medians) if medians else 0
            mean = statistics.mean(medians) if medians else 0
            print(f"| {key.split('/')[-1]} | " + " | ".join(cells) + f" | {mean:.2f} | {ratio:.3f} |")
        print()


def ab_tables(d):
    files = sorted(glob.glob(os.path.join(d, "ab-*.json")))
    if not files:
        return
    print("## Plugin on/off A/B: all_reduce float (8 B: time us; 1 GiB, 8 GiB: busbw GB/s)\n")
    cols = []
    for f in files:
        for r in records(load(f)):
            if r["key"] not in cols:
                cols.append(r["key"])
    print("| run | " + " | ".join(label({"params": {"op": "", "in_place": "inplace" in k}, "key": k}) for k in cols) + " |")
    print("|---|" + "---|" * len(cols))
    sums = {}
    for f in files:
        recs = {r["key"]: r for r in records(load(f))}
        name = os.path.basename(f)[3:-5]
        mode = "mpi" if "mpi" in name else "single"
        plugin = "on" if name.endswith("on") else "off"
        cells = []
        for k in cols:
            r = recs.get(k)
            m = metric(r, "time" if k.endswith("/8B") else "busbw") if r else None
            cells.append(f'{m["value"]:.2f}' if m else "-")
            if m:
                sums.setdefault((mode, k, plugin), []).append(m["value"])
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\n| mode | case | plugin on (mean) | off (mean) | on/off |\n|---|---|---|---|---|")
    for mode in ("single", "mpi"):
        for k in cols:
            on, off = sums.get((mode, k, "on")), sums.get((mode, k, "off"))
            if on and off:
                a, b = statistics.mean(on), statistics.mean(off)
                print(f"| {mode} | {k.split('/', 1)[1]} | {a:.2f} | {b:.2f} | {a / b:.3f} |")
    print()


def main():
    d = sys.argv[1]
    algo_tables(d)
    latency_tables(d)
    ab_tables(d)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cuts a kernel_trace.cpp timeline into engine steps and says where each kind of step spends its time.

A step ends with the sampling kernel (argmax_kernel); steps with the same kernel sequence (names and
grid sizes) form a group, and every group of at least --min-steps steps is summarized: span (first
kernel's start to the argmax's end), GPU busy time (the union of the kernels' intervals), idle time,
and per kernel kind (name and grid) its calls per step, time per step and per call, and what lies
between it and the kernels before it: idle gap (> 0) or overlap (< 0, programmatic launch). Steps
replayed back to back (less than --back-to-back-us after the step before) are summarized apart.

  python3 kernel_trace_summary.py ktrace.csv [--min-steps 16] [--positions 40] [--csv-prefix P]
                                  [--split-after-us US] [--min-kernels N]
"""
import argparse
import collections
import statistics
import sys


def load(path):
    names, kernels = {}, []
    with open(path) as f:
        for line in f:
            kind, rest = line[0], line[2:].rstrip("\n")
            if kind == "N":
                i, name = rest.split(",", 1)
                names[int(i)] = name
            elif kind == "K":
                s, e, stream, gx, gy, gz, bx, n = map(int, rest.split(","))
                kernels.append((s, e, stream, gx * gy * gz, bx, n))
    kernels.sort()
    return names, kernels


def short(name, width=70):
    for prefix in ("void ", "gpuscout::cuda::", "gpuscout::", "(anonymous namespace)::"):
        name = name.replace(prefix, "")
    return name if len(name) <= width else name[: width - 3] + "..."


def split_steps(names, kernels, split_after_us):
    """Steps end with argmax_kernel; with split_after_us, one kernel after any kernel that long (the LM
    head's GEMM, for traces whose kernel names do not tell the argmax apart)."""
    ends = {i for i, n in names.items() if n.split("<")[0].endswith("argmax_kernel")}
    steps, current, end_next = [], [], False
    for k in kernels:
        current.append(k)
        if (split_after_us and end_next) or (not split_after_us and k[5] in ends):
            steps.append(current)
            current = []
        end_next = bool(split_after_us) and (k[1] - k[0]) >= split_after_us * 1e3
    return steps


def med(values):
    return statistics.median(values) if values else 0.0


def busy_ns(step):
    total, cover_end = 0, None
    for s, e, *_ in step:
        if cover_end is None or s >= cover_end:
            total += e - s
            cover_end = e
        elif e > cover_end:
            total += e - cover_end
            cover_end = e
    return total


def gaps(step):
    """Per kernel: start minus the latest end of the kernels before it in the step (ns)."""
    out, latest = [0], step[0][1]
    for s, e, *_ in step[1:]:
        out.append(s - latest)
        latest = max(latest, e)
    return out


def summarize(label, group, names, positions, csv_prefix):
    spans = [(st[-1][1] - st[0][0]) / 1e6 for st in group]
    busy = [busy_ns(st) / 1e6 for st in group]
    print(f"\n== {label}: {len(group)} steps of {len(group[0])} kernels")
    print(f"   span median {med(spans):.3f} ms (p10 {sorted(spans)[len(spans) // 10]:.3f}, "
          f"p90 {sorted(spans)[(9 * len(spans)) // 10]:.3f}) | GPU busy {med(busy):.3f} ms | "
          f"idle inside the step {med([a - b for a, b in zip(spans, busy)]):.3f} ms")
    kinds = collections.OrderedDict()
    for st in group:
        g = gaps(st)
        per = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
        for k, gap in zip(st, g):
            key = (k[5], k[3], k[4])
            p = per[key]
            p[0] += 1
            p[1] += (k[1] - k[0]) / 1e3
            p[2] += max(gap, 0) / 1e3
            p[3] += min(gap, 0) / 1e3
        for key, p in per.items():
            kinds.setdefault(key, []).append(p)
    print(f"   {'kernel':70s} {'grid':>6s} {'blk':>4s} {'calls':>5s} {'ms/step':>8s} {'us/call':>8s} "
          f"{'idle us':>8s} {'ovl us':>8s}")
    rows = []
    for key, ps in kinds.items():
        calls = ps[0][0]
        total = med([p[1] for p in ps])
        rows.append((total, key, calls, med([p[2] for p in ps]), med([p[3] for p in ps])))
    for total, key, calls, idle, overlap in sorted(rows, reverse=True):
        print(f"   {short(names[key[0]]):70s} {key[1]:6d} {key[2]:4d} {calls:5d} {total / 1e3:8.3f} "
              f"{total / calls:8.2f} {idle / calls:8.2f} {overlap / calls:8.2f}")
    print(f"   sum of idle gaps {sum(r[3] for r in rows) / 1e3:.3f} ms/step, of overlaps "
          f"{sum(r[4] for r in rows) / 1e3:.3f} ms/step")
    n = min(positions, len(group[0]))
    print(f"   the first {n} kernels, medians over the steps (us): start offset, duration, gap before")
    all_gaps = [gaps(st) for st in group]
    lines = []
    for i in range(n):
        off = med([(st[i][0] - st[0][0]) / 1e3 for st in group])
        dur = med([(st[i][1] - st[i][0]) / 1e3 for st in group])
        gap = med([g[i] / 1e3 for g in all_gaps])
        k = group[0][i]
        lines.append((i, names[k[5]], k[3], k[4], off, dur, gap))
        print(f"   {i:3d} {short(names[k[5]], 64):64s} {k[3]:6d} {off:9.2f} {dur:8.2f} {gap:8.2f}")
    if csv_prefix:
        path = f"{csv_prefix}-{label.replace(' ', '_')}.csv"
        with open(path, "w") as f:
            f.write("position,kernel,grid,block,start_offset_us,duration_us,gap_before_us\n")
            for i in range(len(group[0])):
                off = med([(st[i][0] - st[0][0]) / 1e3 for st in group])
                dur = med([(st[i][1] - st[i][0]) / 1e3 for st in group])
                gap = med([g[i] / 1e3 for g in all_gaps])
                k = group[0][i]
                f.write(f'{i},"{names[k[5]]}",{k[3]},{k[4]},{off:.3f},{dur:.3f},{gap:.3f}\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--min-steps", type=int, default=16)
    ap.add_argument("--positions", type=int, default=40)
    ap.add_argument("--back-to-back-us", type=float, default=50.0)
    ap.add_argument("--csv-prefix", default="")
    ap.add_argument("--split-after-us", type=float, default=0.0)
    ap.add_argument("--min-kernels", type=int, default=1, help="only groups of steps with at least this many kernels")
    args = ap.parse_args()
    names, kernels = load(args.trace)
    if not kernels:
        sys.exit(f"{args.trace}: no kernel records")
    steps = split_steps(names, kernels, args.split_after_us)
    rule = (f"one kernel after a kernel of >= {args.split_after_us:g} us" if args.split_after_us else
            "in argmax_kernel")
    print(f"{args.trace}: {len(kernels)} kernels, {len(steps)} steps ending {rule}")
    groups = collections.OrderedDict()
    previous_end = None
    for st in steps:
        signature = tuple((k[5], k[3]) for k in st)
        gap = None if previous_end is None else (st[0][0] - previous_end) / 1e3
        previous_end = st[-1][1]
        groups.setdefault(signature, {"b2b": [], "other": []})
        groups[signature]["b2b" if gap is not None and gap < args.back_to_back_us else "other"].append(st)
    for number, (signature, parts) in enumerate(groups.items()):
        for part, group in parts.items():
            if len(group) >= args.min_steps and len(group[0]) >= args.min_kernels:
                label = f"group {number} {'back to back' if part == 'b2b' else 'apart'}"
                summarize(label, group, names, args.positions, args.csv_prefix)


if __name__ == "__main__":
    main()

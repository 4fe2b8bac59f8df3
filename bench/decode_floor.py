#!/usr/bin/env python3
"""The floor of a decode step, from a kernel timeline of bench/run_kernel_trace_h200.sh.

Takes the first group of that number in the timeline's summary (one decode batch's steps) and splits its kernels into
cuBLASLt GEMMs (with their split-k reductions and our own GEMV/GEMM kernels), decode attention and
the rest. The floor keeps the GEMMs as timed in the step, gives attention its K/V bytes at the copy
rate and the rest nothing. With --prefill-ms, --steps and --baseline-s it also prints the static
batch at that floor (prefill step + steps x floor) and its ratio to the baseline's end to end.

Usage: decode_floor.py TRACE.txt --group 15 --kv-gb 2.15 --copy-gbps 3026
           [--prefill-ms 328 --steps 127 --baseline-s 1.611]
"""
import argparse
import re
import sys

ROW = re.compile(r"^\s+(?P<name>\S.*?)\s+(?P<grid>\d+)\s+(?P<block>\d+)\s+(?P<calls>\d+)\s+"
                 r"(?P<ms>-?\d+\.\d+)\s+(?P<us>-?\d+\.\d+)\s+(?P<idle>-?\d+\.\d+)\s+(?P<ovl>-?\d+\.\d+)\s*$")
SPAN = re.compile(r"span median (?P<ms>\d+\.\d+) ms")


def kind_of(name):
    if name.startswith("nvjet") or "splitKreduce" in name or "gemm" in name or "gemv" in name:
        return "gemm"
    if "attention" in name or "pair_kernel" in name or "decode_split" in name or "decode_merge" in name:
        return "attention"
    return "other"


def read_group(path, group, order):
    """The span and the kernel rows of the first summary group `group` with steps `order`."""
    header = re.compile(rf"^== group {group} {order}:")
    span, rows, inside = None, [], False
    with open(path) as f:
        for line in f:
            if header.match(line):
                if inside:
                    break
                inside = True
                continue
            if not inside:
                continue
            if line.startswith("== ") or line.startswith("#"):
                break
            if span is None and (m := SPAN.search(line)):
                span = float(m["ms"])
            elif m := ROW.match(line):
                rows.append((m["name"], int(m["calls"]), float(m["ms"])))
            elif "the first" in line:
                break
    if span is None or not rows:
        raise SystemExit(f"{path}: no summary group {group} ({order}) with a span and kernel rows")
    return span, rows


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--group", type=int, required=True, help="summary group number (one decode batch)")
    p.add_argument("--order", choices=["back to back", "apart"], default="back to back",
                   help="the group's steps replayed back to back (default) or apart")
    p.add_argument("--kv-gb", type=float, required=True, help="K/V bytes a step reads, GB")
    p.add_argument("--copy-gbps", type=float, required=True, help="device copy rate, GB/s")
    p.add_argument("--prefill-ms", type=float, help="the static batch's prefill step, ms")
    p.add_argument("--steps", type=int, default=127, help="decode steps after the prefill step")
    p.add_argument("--baseline-s", type=float, help="the baseline's static batch end to end, s")
    a = p.parse_args(argv)
    if a.kv_gb < 0 or a.copy_gbps <= 0:
        raise SystemExit("--kv-gb must be >= 0 and --copy-gbps > 0")

    span, rows = read_group(a.trace, a.group, a.order)
    sums = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for name, _, ms in rows:
        sums[kind_of(name)] += ms
    kv_ms = a.kv_gb / a.copy_gbps * 1e3
    floor = sums["gemm"] + kv_ms
    print(f"group {a.group}: step {span:.3f} ms, {len(rows)} kernels")
    print(f"  GEMMs (cuBLASLt, split-k reductions, ours) {sums['gemm']:.3f} ms")
    print(f"  decode attention {sums['attention']:.3f} ms; its K/V at the copy rate {kv_ms:.3f} ms")
    print(f"  the rest {sums['other']:.3f} ms")
    print(f"floor (GEMMs + K/V at the copy rate): {floor:.3f} ms, {floor / span:.1%} of the step")
    if a.prefill_ms is not None:
        static_s = (a.prefill_ms + a.steps * floor) / 1e3
        line = f"static batch at the floor: {a.prefill_ms:.0f} ms + {a.steps} x {floor:.3f} ms = {static_s:.3f} s"
        if a.baseline_s:
            line += f", {a.baseline_s / static_s:.2f}x a baseline of {a.baseline_s:.3f} s"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

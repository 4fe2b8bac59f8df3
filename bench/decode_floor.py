#!/usr/bin/env python3
"""The floor of a decode step, from a kernel timeline of bench/run_kernel_trace_h200.sh.

Takes the first summary group of the number given (one decode batch's steps) and splits its kernels
into cuBLASLt GEMMs (with their split-k reductions and our own GEMV/GEMM kernels), decode attention
and the rest. The floor keeps the GEMMs as timed in the step, gives attention its K/V bytes at the copy
rate and the rest nothing. With --weight-gb it also prints the roofline: the weights and the K/V
both at the copy rate, the step of an engine whose GEMMs stream as fast as a copy (no engine's
step is shorter). With --prefill-ms, --steps and --baseline-s it prints the static batch at the
floor and at the roofline (prefill step + steps x step) and their ratios to the baseline's end to end.

The K/V bytes, copy rate, prefill step and decode steps can come from a serve result file
(--serve-json: the decode case of --batch, its weight bytes, the static batch's TTFT p50 and output
tokens) and the baseline from bench/serve_baseline_torch.py's JSON lines (--torch-jsonl: the end to
end of the form with the faster decode step at --batch, as bench/serve_compare.py takes it). Flags
given override.

Usage: decode_floor.py TRACE.txt --group 15 --kv-gb 2.15 --copy-gbps 3026
           [--prefill-ms 328 --steps 127 --baseline-s 1.611]
       decode_floor.py TRACE.txt --group 15 --serve-json SERVE.json --torch-jsonl TORCH.jsonl [--batch 32]
"""
import argparse
import json
import re
import sys

from serve_compare import baseline_forms, metric, torch_lines

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
    try:
        with open(path) as f:
            for line in f:
                if not inside:
                    inside = bool(header.match(line))
                    continue
                # The group ends at the next header or at its per-position listing.
                if line.startswith("== ") or line.startswith("#") or "the first" in line:
                    break
                if span is None and (m := SPAN.search(line)):
                    span = float(m["ms"])
                elif m := ROW.match(line):
                    rows.append((m["name"], float(m["ms"])))
    except OSError as e:
        raise SystemExit(f"{path}: {e.strerror}")
    if span is None or not rows:
        raise SystemExit(f"{path}: no summary group {group} ({order}) with a span and kernel rows")
    return span, rows


def fill_from_serve(a):
    """The flags not given, from the serve result file's decode case at a.batch and static batch."""
    try:
        with open(a.serve_json) as f:
            records = json.load(f).get("records", [])
    except (OSError, ValueError) as e:
        raise SystemExit(f"{a.serve_json}: not a readable result file ({e})")
    decode = [r for r in records if r.get("key", "").startswith("serve/decode/") and
              r.get("params", {}).get("batch") == a.batch]
    if not decode:
        raise SystemExit(f"{a.serve_json}: no serve/decode/ record of batch {a.batch}")
    params = decode[0]["params"]
    if a.copy_gbps is None:
        a.copy_gbps = params["copy_bandwidth_gbps"]
    if a.weight_gb is None:
        a.weight_gb = params["weight_bytes_read_per_step"] / 1e9
    static = next((r for r in records if r.get("key", "").startswith("serve/static/")), None)
    if a.kv_gb is None:
        a.kv_gb = params["kv_bytes_read_per_step"] / 1e9
        if static is not None:
            # The static batch's decode steps attend to isl + 1 .. isl + osl - 1 tokens: its K/V
            # per step is the decode case's at the mean of those contexts.
            mean_context = static["params"]["input_tokens"] + static["params"]["output_tokens"] / 2
            a.kv_gb *= mean_context / params["context_tokens"]
            print(f"K/V per step: the decode case's {params['kv_bytes_read_per_step'] / 1e9:.3f} GB at "
                  f"{params['context_tokens']} tokens, scaled to the static batch's mean context {mean_context:.0f}")
    if static is None:
        return
    if a.prefill_ms is None:
        a.prefill_ms = metric(static, "ttft")
    if a.steps is None:
        a.steps = static["params"]["output_tokens"] - 1


def baseline_from_torch(path, batch):
    """End to end seconds of the baseline at `batch`, as serve_compare.py takes it."""
    try:
        _, baseline = baseline_forms(torch_lines(path))
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: not readable JSON lines ({e})")
    if batch not in baseline:
        raise SystemExit(f"{path}: no case \"batch\" line of batch {batch}")
    return baseline[batch]["e2e_s"]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--group", type=int, required=True, help="summary group number (one decode batch)")
    p.add_argument("--order", choices=["back to back", "apart"], default="back to back",
                   help="the group's steps replayed back to back (default) or apart")
    p.add_argument("--kv-gb", type=float, help="K/V bytes a step reads, GB")
    p.add_argument("--copy-gbps", type=float, help="device copy rate, GB/s")
    p.add_argument("--weight-gb", type=float, help="weight bytes a step reads, GB (for the roofline)")
    p.add_argument("--prefill-ms", type=float, help="the static batch's prefill step, ms")
    p.add_argument("--steps", type=int, help="decode steps after the prefill step (default 127)")
    p.add_argument("--baseline-s", type=float, help="the baseline's static batch end to end, s")
    p.add_argument("--serve-json", help="a serve result file: K/V and weight bytes, copy rate, prefill step, steps")
    p.add_argument("--torch-jsonl", help="serve_baseline_torch.py's output: the baseline's end to end")
    p.add_argument("--batch", type=int, default=32, help="the batch of the decode case and baseline (32)")
    a = p.parse_args(argv)
    if a.serve_json:
        fill_from_serve(a)
    if a.torch_jsonl and a.baseline_s is None:
        a.baseline_s = baseline_from_torch(a.torch_jsonl, a.batch)
    if a.steps is None:
        a.steps = 127
    if a.kv_gb is None or a.copy_gbps is None:
        raise SystemExit("give --kv-gb and --copy-gbps, or --serve-json with a decode case of --batch")
    if a.kv_gb < 0 or a.copy_gbps <= 0:
        raise SystemExit("--kv-gb must be >= 0 and --copy-gbps > 0")
    if a.weight_gb is not None and a.weight_gb <= 0:
        raise SystemExit("--weight-gb must be > 0")

    span, rows = read_group(a.trace, a.group, a.order)
    sums = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for name, ms in rows:
        sums[kind_of(name)] += ms
    kv_ms = a.kv_gb / a.copy_gbps * 1e3
    floor = sums["gemm"] + kv_ms
    print(f"group {a.group}: step {span:.3f} ms, {len(rows)} kernels")
    print(f"  GEMMs (cuBLASLt, split-k reductions, ours) {sums['gemm']:.3f} ms")
    print(f"  decode attention {sums['attention']:.3f} ms")
    print(f"  the rest {sums['other']:.3f} ms")
    print(f"K/V of {a.kv_gb:.3f} GB at the copy rate: {kv_ms:.3f} ms")
    print(f"floor (GEMMs + K/V at the copy rate): {floor:.3f} ms, {floor / span:.1%} of the traced step")
    steps = {"floor": floor}
    if a.weight_gb is not None:
        weight_ms = a.weight_gb / a.copy_gbps * 1e3
        steps["roofline"] = weight_ms + kv_ms
        print(f"roofline (weights {a.weight_gb:.3f} GB + K/V at the copy rate): {steps['roofline']:.3f} ms, "
              f"{steps['roofline'] / span:.1%} of the traced step; the GEMMs at "
              f"{weight_ms / sums['gemm']:.1%} of the copy rate")
    if a.prefill_ms is not None:
        for name, step in steps.items():
            static_s = (a.prefill_ms + a.steps * step) / 1e3
            line = f"static batch at the {name}: {a.prefill_ms:.0f} ms + {a.steps} x {step:.3f} ms = {static_s:.3f} s"
            if a.baseline_s:
                line += f", {a.baseline_s / static_s:.2f}x a baseline of {a.baseline_s:.3f} s"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Ratios of gpuscout's collectives records to the PyTorch reference (bench/collectives_reference_torch.py)
per collective: time at the smallest size (8 B by default: latency) and busbw at 1 GiB and 8 GiB.

  python3 bench/collectives_compare.py GPUSCOUT.json TORCH.json [--sizes 8,1G,8G] [--dtype float] [--format table|md]

GPUSCOUT.json: a `gpuscout bench --only collectives` result file (records collectives/<op>/<dtype>/<oop|inplace>/<size>,
metrics time (us), algbw, busbw in GB/s; params.bytes in nccl-tests' size semantics, as the torch file).
Each torch row is matched with the gpuscout record of the same op, dtype, bytes and in-place flag (torch runs
all_reduce and broadcast in place only); when gpuscout has no record of that flag, its other one is used and
the row says so. Ratios are gpuscout / torch: for busbw > 1 means gpuscout is faster, for time < 1 does.
Note the statistics differ: gpuscout's time is the median of its samples of back-to-back ops on the host
clock; the torch file's is the mean over ranks of CUDA-event time over its timed ops (see its "method").
Exit status: 0 printed; 1 a file is missing or not of the expected shape; 2 usage.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collectives_reference_torch import format_bytes, parse_bytes  # noqa: E402 (imports no torch)

OP_NAMES = {  # gpuscout keys use nccl-tests' names, as the torch file's "op"
    "all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
    "alltoall": "alltoall", "broadcast": "broadcast", "sendrecv": "sendrecv",
}


def load(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"collectives_compare: {what} {path}: {e}")


def metric(record, name):
    for m in record.get("metrics", []):
        if m.get("name") == name:
            return m.get("value")
    return None


def gpuscout_index(doc, path, dtype):
    """(op, bytes, in_place) -> record, passed collectives records of `dtype` only."""
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        sys.exit(f"collectives_compare: {path}: not a gpuscout result file (no 'records' list)")
    out = {}
    for r in doc["records"]:
        p = r.get("params", {})
        if r.get("benchmark") != "collectives" or r.get("outcome") != "passed" or p.get("dtype") != dtype:
            continue
        out[(p.get("op"), int(p.get("bytes", -1)), bool(p.get("in_place")))] = r
    if not out:
        sys.exit(f"collectives_compare: {path}: no passed collectives records of dtype {dtype}")
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gpuscout")
    ap.add_argument("torch")
    ap.add_argument("--sizes", default="8,1G,8G",
                    help="sizes to compare (default 8,1G,8G); the smallest compares time, the others busbw")
    ap.add_argument("--dtype", default="float", help="gpuscout dtype to match (default float: the torch file's)")
    ap.add_argument("--format", choices=["table", "md"], default="table")
    args = ap.parse_args(argv)
    try:
        sizes = sorted({parse_bytes(s) for s in args.sizes.split(",") if s.strip()})
    except argparse.ArgumentTypeError as e:
        ap.error(f"--sizes: {e}")
    ours = gpuscout_index(load(args.gpuscout, "gpuscout file"), args.gpuscout, args.dtype)
    ref = load(args.torch, "torch file")
    if not isinstance(ref, dict) or not isinstance(ref.get("results"), list):
        sys.exit(f"collectives_compare: {args.torch}: not a collectives_reference_torch.py file (no 'results')")
    torch_rows = {(r["op"], int(r["bytes"])): r for r in ref["results"]}
    ops = [op for op in OP_NAMES if any(k[0] == op for k in torch_rows)]
    latency_size = sizes[0]

    header = ["op", "size", "quantity", "gpuscout", "torch", "ratio", "note"]
    rows = []
    for op in ops:
        for size in sizes:
            t = torch_rows.get((op, size))
            quantity = "time (us)" if size == latency_size else "busbw (GB/s)"
            if t is None:
                rows.append([op, format_bytes(size), quantity, "", "", "", "size not in the torch file"])
                continue
            in_place = bool(t.get("in_place"))
            g = ours.get((op, size, in_place))
            note = "in place" if in_place else "out of place"
            if g is None:
                g = ours.get((op, size, not in_place))
                if g is not None:
                    note = (f"torch {'in place' if in_place else 'out of place'}, "
                            f"gpuscout {'out of place' if in_place else 'in place'}")
            if g is None:
                rows.append([op, format_bytes(size), quantity, "", "", "", "size not in the gpuscout file"])
                continue
            if size == latency_size:
                ours_v, theirs = metric(g, "time"), t.get("time_us")
            else:
                ours_v, theirs = metric(g, "busbw"), t.get("busbw_gbs")
            ratio = ours_v / theirs if ours_v and theirs else None
            if t.get("wrong", 0) > 0:
                note += f"; torch had {t['wrong']} wrong values"
            rows.append([op, format_bytes(size), quantity, f"{ours_v:.2f}" if ours_v is not None else "",
                         f"{theirs:.2f}" if theirs is not None else "", f"{ratio:.3f}" if ratio else "", note])

    if args.format == "md":
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for r in [header, ["-" * w for w in widths]] + rows:
            print("  ".join(str(x).ljust(w) if i in (0, 1, 2, 6) else str(x).rjust(w)
                            for i, (x, w) in enumerate(zip(r, widths))).rstrip())
    print(f"ratio = gpuscout / torch (busbw: > 1 gpuscout faster; time: < 1 gpuscout faster); torch "
          f"{ref.get('torch', '?')}, NCCL {ref.get('nccl', '?')}, {ref.get('world_size', '?')} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

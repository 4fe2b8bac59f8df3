#!/usr/bin/env python3
"""Writes data/calibration/<gpu>.toml: the compact efficiency table gpuscout embeds for one GPU type
(--spec, the H200 by default), from the measured result files of that GPU in bench/results/ (gpuscout
bench JSON). Files whose gpus[].spec_name names another GPU are left out, as calibration_from_results
(src/model/calibration.cpp) leaves them out; JSON files that are not result sets are skipped.

Definitions (docs/modeling.md, "Calibration"):
  GEMM compute efficiency  = measured FLOP/s / dense peak of the precision, for compute-bound shapes
                             (arithmetic intensity 2mnk / (bytes of A, B, C) above the spec ridge
                             peak / bandwidth), median over shapes per m (tokens).
  GEMM weight-stream eff.  = (bytes of A, B, C) / time / spec bandwidth, for memory-bound shapes
                             (small m: decode): median over shapes and m; by bytes, each shape at its
                             fewest rows; by rows, time at one row / time at m rows, median over shapes.
  memory efficiency        = measured GB/s / spec bandwidth, median over read/write/copy/triad per
                             array size; sizes that stay in L2 are skipped.
  host transfer            = pinned copy-engine GB/s, median per direction.
Usage: scripts/make-calibration.py [--spec data/gpus/h200-sxm-141gb.toml] [--out FILE] [RESULT.json ...]
       (--out defaults to data/calibration/<spec file's name without -sxm...>.toml: h200.toml, h100.toml)
Without RESULT files it reads every bench/results/*.json of the GPU. The embedded H200 table was made
of a chosen list (its `files`): `scripts/make-calibration.py $(those files)` rebuilds it.
"""
import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ELEMENT_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="table to write (default data/calibration/<gpu>.toml, e.g. h200.toml)")
    ap.add_argument("--spec", default=os.path.join(ROOT, "data/gpus/h200-sxm-141gb.toml"))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    if not args.out:
        stem = os.path.splitext(os.path.basename(args.spec))[0].split("-")[0]  # h200-sxm-141gb -> h200
        args.out = os.path.join(ROOT, "data/calibration", stem + ".toml")
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "bench/results/*.json")))
    with open(args.spec, "rb") as f:
        spec = tomllib.load(f)
    bandwidth = float(spec["memory"]["bandwidth_gbs"]) * 1e9
    peaks = {k: float(v) * 1e12 for k, v in spec["peak_dense"].items()}
    gpu_name = spec["name"]

    compute = {}  # precision -> m -> [eta]
    stream = {}  # precision -> [eta]
    stream_shapes = {}  # precision -> (n, k) -> m -> [(seconds, bytes)]
    memory = {}  # bytes -> [eta]
    host = {"h2d": [], "d2h": []}
    ar_small, ar_busbw, ar_ranks = {}, [], {}  # all-reduce: time (us) by ranks and bytes, busbw >= 64 MiB
    a2a_small, a2a_busbw, a2a_ranks = {}, [], {}  # all-to-all: the same
    used, tool_commits = [], set()
    for path in files:
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or "records" not in doc:
            continue  # not a gpuscout result set (doctor output, a PyTorch baseline's list)
        if any(g.get("spec_name") not in (None, "", gpu_name) for g in doc.get("gpus", [])):
            continue  # measured on another GPU type
        commit = doc.get("provenance", {}).get("tool", {}).get("git_commit")
        took = False
        for rec in doc.get("records", []):
            if rec.get("outcome") != "passed":
                continue
            metrics = {m["name"]: m["value"] for m in rec.get("metrics", [])}
            p = rec.get("params", {})
            if rec.get("benchmark") == "gemm" and "throughput" in metrics:
                prec = p.get("precision")
                peak_key = "fp64_tensor" if prec == "fp64" else prec  # cuBLAS DGEMM runs on the FP64 tensor cores
                if peak_key not in peaks or prec not in ELEMENT_BYTES:
                    continue
                m, n, k = p["m"], p["n"], p["k"]
                flops = 2.0 * m * n * k
                t = flops / (metrics["throughput"] * 1e12)
                nbytes = (m * k + k * n + m * n) * ELEMENT_BYTES[prec]
                if flops / nbytes > peaks[peak_key] / bandwidth:
                    compute.setdefault(prec, {}).setdefault(m, []).append(metrics["throughput"] * 1e12 / peaks[peak_key])
                else:
                    stream.setdefault(prec, []).append(nbytes / t / bandwidth)
                    stream_shapes.setdefault(prec, {}).setdefault((n, k), {}).setdefault(m, []).append((t, nbytes))
                took = True
            elif rec.get("benchmark") == "memory" and "bandwidth" in metrics:
                if p.get("l2_resident") or p.get("op") == "ce_copy":
                    continue
                memory.setdefault(p["array_bytes"], []).append(metrics["bandwidth"] * 1e9 / bandwidth)
                took = True
            elif rec.get("benchmark") == "collectives" and p.get("op") in ("all_reduce", "alltoall") and "time" in metrics:
                small, busbw, ranks = ((ar_small, ar_busbw, ar_ranks) if p["op"] == "all_reduce"
                                       else (a2a_small, a2a_busbw, a2a_ranks))
                n = p.get("ranks", 2)
                small.setdefault(n, {}).setdefault(p["bytes"], []).append(metrics["time"])
                if p["bytes"] >= 64 << 20 and "busbw" in metrics:
                    busbw.append(metrics["busbw"])
                ranks[n] = ranks.get(n, 0) + 1
                took = True
            elif rec.get("benchmark") == "transfer" and "bandwidth" in metrics:
                key = rec["key"].split("/")[1]
                if key in ("h2d_ce_pinned", "d2h_ce_pinned"):
                    host[key[:3]].append(metrics["bandwidth"])
                    took = True
        if took:
            used.append(os.path.relpath(path, ROOT))
            if commit:
                tool_commits.add(commit)
    try:
        repo_commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                     text=True, check=True).stdout.strip()
    except Exception:  # noqa: BLE001 - outside a checkout
        repo_commit = "unknown"

    out = ["# Generated by scripts/make-calibration.py from measured gpuscout result files; do not edit by hand.",
           "# Efficiencies are fractions of the spec sheet (dense peak per precision, memory bandwidth) of `gpu`.",
           "[calibration]",
           f'gpu = "{gpu_name}"',
           f'architecture = "{spec["architecture"]}"',
           f'bandwidth_gbs = {spec["memory"]["bandwidth_gbs"]}  # spec: the memory-bound curves are fractions of it',
           f'source = "measured: gpuscout bench on {gpu_name} (bench/results at commit {repo_commit})"',
           f'repo_commit = "{repo_commit}"',
           "tool_commits = [" + ", ".join(f'"{c}"' for c in sorted(tool_commits)) + "]",
           "files = [" + ", ".join(f'"{u}"' for u in used) + "]",
           ""]
    for prec in sorted(compute):
        pts = sorted((m, statistics.median(v)) for m, v in compute[prec].items())
        out.append(f"[gemm.{prec}]")
        out.append("# [m (tokens), median compute efficiency] over compute-bound shapes")
        out.append("compute_efficiency = [" + ", ".join(f"[{m}, {e:.4f}]" for m, e in pts) + "]")
        if prec in stream:
            out.append(f"weight_stream_efficiency = {statistics.median(stream[prec]):.4f}  "
                       f"# median of {len(stream[prec])} memory-bound shapes")
            # As calibration_from_results (src/model/calibration.cpp): the bytes curve takes each shape at its
            # fewest rows; the rows curve, each shape's time at one row over its time at more rows.
            by_bytes, by_rows = {}, {}
            for by_m in stream_shapes[prec].values():
                m0 = min(by_m)
                for t, nbytes in by_m[m0]:
                    by_bytes.setdefault(nbytes, []).append(nbytes / t / bandwidth)
                if m0 != 1:
                    continue
                t0 = statistics.median(t for t, _ in by_m[m0])
                for m, pts in by_m.items():
                    if m != m0:
                        by_rows.setdefault(m, []).append(t0 / statistics.median(t for t, _ in pts))
            pts_b = sorted((b, statistics.median(v)) for b, v in by_bytes.items())
            out.append("# [bytes of A, B and C, median weight-stream efficiency] over memory-bound shapes at their "
                       "fewest rows")
            out.append("weight_stream_by_bytes = [" + ", ".join(f"[{b}, {e:.4f}]" for b, e in pts_b) + "]")
            if by_rows:
                pts_m = [(1, 1.0)] + sorted((m, statistics.median(v)) for m, v in by_rows.items())
                out.append("# [m (rows), median over shapes of time at one row / time at m rows]")
                out.append("weight_stream_by_rows = [" + ", ".join(f"[{m}, {e:.4f}]" for m, e in pts_m) + "]")
        out.append("")
    pts = sorted((b, statistics.median(v)) for b, v in memory.items())
    out.append("[memory]")
    out.append("# [array bytes, median of read/write/copy/triad GB/s over spec bandwidth]")
    out.append("efficiency_by_size = [" + ", ".join(f"[{b}, {e:.4f}]" for b, e in pts) + "]")
    out.append("")
    for section, op, small, busbw, ranks in (("allreduce", "all-reduce", ar_small, ar_busbw, ar_ranks),
                                             ("alltoall", "all-to-all", a2a_small, a2a_busbw, a2a_ranks)):
        if small and busbw:
            # As calibration_from_results (src/model/calibration.cpp): the rank count most records have.
            n = max(ranks, key=lambda r: ranks[r])
            by_bytes = small[n]
            smallest = min(by_bytes)
            out.append(f"[{section}]")
            out.append(f"alpha_us = {statistics.median(by_bytes[smallest]):.2f}  # median time of the {smallest}-byte {op}")
            out.append(f"busbw_gbs = {max(busbw):.1f}  # best busbw at >= 64 MiB")
            out.append(f"ranks = {n}")
            out.append(f"# [message bytes, median time us] at {n} ranks, joined by straight lines")
            out.append("time_by_bytes = [" + ", ".join(f"[{b}, {statistics.median(v):.2f}]"
                                                      for b, v in sorted(by_bytes.items())) + "]")
            out.append(f'source = "measured: NCCL {op} on {n} x {gpu_name} (bench/results)"')
            out.append("")
    out.append("[host]")
    for d in ("h2d", "d2h"):
        if host[d]:
            out.append(f"{d}_gbs = {statistics.median(host[d]):.2f}  # pinned, copy engine, median of {len(host[d])}")
    out.append("")
    # Written beside the table, then renamed over it: an interrupted run leaves the old table whole.
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out))
    os.replace(tmp, args.out)
    print(f"wrote {os.path.relpath(args.out, ROOT)} from {len(used)} files")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch's matrix products timed the way gpuscout's gemm benchmark times cuBLASLt.

Same operation and layout: Y[m,n] = X[m,k] @ W[n,k].T with row-major X and W (nn.Linear, and
torch._scaled_mm(x, w.t()) for FP8), i.e. cuBLAS's TN. Same data: standard-normal random inputs
(FP8 quantized from them, INT8 uniform in [-128, 127]). Same cache treatment: enough input sets
rotated that their bytes exceed 4x the L2. Same statistic: warm-up by time, then CUDA-event
timing of single calls, median over at least --min-samples samples.

Prints one JSON document on stdout; progress goes to stderr.

  python3 bench/gemm_reference.py --sizes 4096,8192,16384 --precisions fp32,tf32,fp16,bf16,fp8
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch

KNOWN = ["fp32", "tf32", "fp16", "bf16", "fp8", "int8"]
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
BYTES = {"fp32": (4, 4), "tf32": (4, 4), "fp16": (2, 2), "bf16": (2, 2), "fp8": (1, 2), "int8": (1, 4)}
SCALE_X, SCALE_W = 0.5, 0.25  # as gpuscout's FP8 case


def cublaslt_library():
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libcublasLt" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


def make_operands(precision, m, n, k, layout, gen):
    """One set: (x, w) such that op(x, w) computes X @ W^T."""
    dev = "cuda"
    if precision == "fp8":
        x = torch.randn(m, k, device=dev, generator=gen).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=dev, generator=gen).to(torch.float8_e4m3fn)
        return x, w
    if precision == "int8":
        x = torch.randint(-128, 128, (m, k), device=dev, dtype=torch.int8, generator=gen)
        w = torch.randint(-128, 128, (n, k), device=dev, dtype=torch.int8, generator=gen)
        return x, w
    dtype = DTYPES[precision]
    x = torch.randn(m, k, device=dev, dtype=dtype, generator=gen)
    if layout == "tn":
        w = torch.randn(n, k, device=dev, dtype=dtype, generator=gen)
    else:  # nn: W^T stored row-major as [k, n], plain torch.matmul(x, w)
        w = torch.randn(k, n, device=dev, dtype=dtype, generator=gen)
    return x, w


def make_op(precision, layout):
    if precision == "fp8":
        sx = torch.tensor(SCALE_X, device="cuda", dtype=torch.float32)
        sw = torch.tensor(SCALE_W, device="cuda", dtype=torch.float32)
        return lambda x, w: torch._scaled_mm(x, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
    if precision == "int8":
        return lambda x, w: torch._int_mm(x, w.t())
    if layout == "tn":
        return lambda x, w: torch.matmul(x, w.t())
    return lambda x, w: torch.matmul(x, w)


def measure(precision, m, n, k, layout, args, l2_bytes):
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    a_bytes, d_bytes = BYTES[precision]
    set_bytes = (m * k + n * k) * a_bytes + m * n * d_bytes
    sets = max(1, min(64, math.ceil(4 * l2_bytes / set_bytes)))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    operands = [make_operands(precision, m, n, k, layout, gen) for _ in range(sets)]
    op = make_op(precision, layout)
    i = 0

    def call():
        nonlocal i
        x, w = operands[i % sets]
        i += 1
        return op(x, w)

    # Correctness spot check against FP64 on a few rows (catches a wrong layout in this script).
    try:
        x0, w0 = operands[0]
        rows = slice(0, min(m, 4))
        y = op(x0, w0)[rows].double()
        xr = x0[rows].float().double()
        wr = w0.float().double()
        ref = xr @ (wr.t() if (layout == "tn" or precision in ("fp8", "int8")) else wr)
        if precision == "fp8":
            ref = ref * SCALE_X * SCALE_W
        err = ((y - ref).abs().max() / ref.pow(2).mean().sqrt()).item()
    except Exception as e:  # noqa: BLE001 - the check is a courtesy; timing goes on
        err = f"check failed: {type(e).__name__}: {e}"

    # Warm-up by time, then single calls between events, enqueued back to back.
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.warmup_s:
        for _ in range(4):
            call()
        torch.cuda.synchronize()
    times = []
    t0 = time.perf_counter()
    while len(times) < args.min_samples or (time.perf_counter() - t0) < args.min_time_s:
        group = max(1, min(50, args.min_samples))
        events = [torch.cuda.Event(enable_timing=True) for _ in range(group + 1)]
        events[0].record()
        for g in range(group):
            call()
            events[g + 1].record()
        events[-1].synchronize()
        times += [events[g].elapsed_time(events[g + 1]) * 1e-3 for g in range(group)]
        if time.perf_counter() - t0 > args.max_time_s:
            break
    times.sort()
    med = statistics.median(times)
    q = lambda p: times[min(len(times) - 1, int(p * (len(times) - 1)))]
    flops = 2.0 * m * n * k
    del operands
    torch.cuda.empty_cache()
    return {
        "precision": precision,
        "m": m,
        "n": n,
        "k": k,
        "layout": layout.upper(),
        "op": {"fp8": "torch._scaled_mm", "int8": "torch._int_mm"}.get(precision, "torch.matmul"),
        "tflops_median": flops / med / 1e12,
        "time_ms_median": med * 1e3,
        "time_ms_p10": q(0.1) * 1e3,
        "time_ms_p90": q(0.9) * 1e3,
        "samples": len(times),
        "rotation_sets": sets,
        "max_error_vs_rms_first_rows": err,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,8192,16384")
    parser.add_argument("--precisions", default="fp32,tf32,fp16,bf16,fp8")
    parser.add_argument("--layouts", default="tn", help="tn (nn.Linear, as gpuscout), nn (plain matmul), or both")
    parser.add_argument("--warmup-s", type=float, default=0.3)
    parser.add_argument("--min-samples", type=int, default=20)
    parser.add_argument("--min-time-s", type=float, default=0.05)
    parser.add_argument("--max-time-s", type=float, default=2.0)
    parser.add_argument("--skip", default="", help="precision:size pairs to leave out, e.g. fp32:16384")
    args = parser.parse_args()

    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 50 << 20)
    skip = {s for s in args.skip.split(",") if s}
    layouts = ["tn", "nn"] if args.layouts == "both" else [args.layouts]
    results = []
    for precision in [p for p in args.precisions.split(",") if p]:
        if precision not in KNOWN:
            sys.exit(f"unknown precision {precision}; known: {', '.join(KNOWN)}")
        for size in [int(s) for s in args.sizes.split(",") if s]:
            if f"{precision}:{size}" in skip:
                continue
            for layout in layouts:
                if layout == "nn" and precision in ("fp8", "int8"):
                    continue
                try:
                    r = measure(precision, size, size, size, layout, args, l2_bytes)
                except Exception as e:  # noqa: BLE001 - report and go on
                    r = {"precision": precision, "m": size, "n": size, "k": size, "layout": layout.upper(),
                         "error": f"{type(e).__name__}: {e}"}
                print(f"torch {precision} {size} {layout}: "
                      + (f"{r['tflops_median']:.1f} TFLOP/s" if "tflops_median" in r else r["error"]),
                      file=sys.stderr, flush=True)
                results.append(r)
    doc = {
        "tool": "bench/gemm_reference.py",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cublaslt_library": cublaslt_library(),
        "device": torch.cuda.get_device_name(0),
        "l2_bytes": l2_bytes,
        "method": (f"warm-up {args.warmup_s} s, then CUDA events around single calls, median of >= "
                   f"{args.min_samples} samples and >= {args.min_time_s} s; inputs rotated over >= 4x L2"),
        "results": results,
    }
    json.dump(doc, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

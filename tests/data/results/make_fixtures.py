#!/usr/bin/env python3
"""Writes the hand-made result files under tests/data/results/ (schema 1.0).

FIXTURES, NOT MEASUREMENTS: every number here is invented to exercise `gpuscout report` and
`gpuscout compare` (plateaus, peaks, spreads that overlap or not, missing and failed records). The
record keys and params follow what backends/cuda/benchmarks/*.cu emit (gemm, memory, transfer);
p2p and collectives as backends/cuda/benchmarks/p2p.cu and collectives.cu write them.
Run it from anywhere: python3 tests/data/results/make_fixtures.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE_TAG = "hand-written test data, not a measurement"
GIB = 1 << 30
MIB = 1 << 20


def size_name(size):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if size < 1024 or size % 1024:
            return f"{size}{unit}"
        size //= 1024
    return f"{size}TiB"


def spread(value, rel):
    d = value * rel
    return {"min": value - 2 * d, "max": value + 2 * d, "p10": value - d, "p90": value + d, "mean": value,
            "stddev": d / 1.5}


def metric(name, value, unit, rel=0.01, samples=20, note=None, statistic="median"):
    m = {"name": name, "value": value, "unit": unit, "statistic": statistic, "samples": samples}
    if samples > 1 and rel is not None:
        m["spread"] = spread(value, rel)
    if note:
        m["note"] = note
    return m


def record(key, benchmark, params, metrics, gpus=(0,), outcome="passed", reason=None, extra=None):
    r = {"key": key, "benchmark": benchmark, "gpus": list(gpus), "params": params, "metrics": metrics,
         "outcome": outcome}
    if reason:
        r["reason"] = reason
    r["extra"] = extra or {}
    return r


def result(records, host, commit, created, gpu_count=2):
    gpus = []
    for i in range(gpu_count):
        gpus.append({"index": i, "name": "NVIDIA H200", "spec_name": "H200-SXM-141GB",
                     "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}", "pci_bus_id": f"0000:0{i + 1}:00.0",
                     "sm_count": 132, "memory_bytes": 150109880320, "compute_capability": "9.0",
                     "max_sm_clock_mhz": 1980.0, "power_limit_w": 700.0, "ecc_enabled": True, "mig_enabled": False,
                     "numa_node": 0})
    return {
        "schema_version": "1.0", "kind": "bench", "complete": True,
        "provenance": {
            "tool": {"name": "gpuscout", "version": "0.1.0", "git_commit": commit},
            "created_utc": created,
            "command_line": ["gpuscout", "bench", "--out", "fixture.json", "--tags", "fixture:yes"],
            "host": {"hostname": host, "os": "Linux (fixture)", "cpu": "fixture CPU"},
            "software": {"driver": "000.00 (fixture)", "cuda_runtime": "0.0 (fixture)", "cuda_driver": "0.0 (fixture)",
                         "cublas": "0.0.0 (fixture)", "nccl": "0.0.0 (fixture)"},
            "environment": {"CUDA_VISIBLE_DEVICES": "0,1"},
            "tags": {"fixture": FIXTURE_TAG},
            "data_source": "embedded data"},
        "gpus": gpus, "topology": {}, "records": records}


def full_run(scale, host, commit, created, drop=(), add_extra=False):
    """A full run of every benchmark kind; `scale` nudges values so two runs differ."""
    recs = []
    peaks = {"fp64": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9, "int8": 1978.9}
    eff = {"fp64": 0.82, "tf32": 0.70, "fp16": 0.74, "bf16": 0.75, "fp8": 0.66, "int8": 0.60}
    for p, peak in peaks.items():
        for (m, n, k) in [(4096, 4096, 4096), (8192, 8192, 8192)]:
            tf = peak * eff[p] * (0.9 if m == 4096 else 1.0) * scale.get("gemm_" + p, 1.0)
            unit = "TOP/s" if p == "int8" else "TFLOP/s"
            recs.append(record(f"gemm/{p}/m{m}_n{n}_k{k}", "gemm",
                               {"precision": p, "m": m, "n": n, "k": k, "layout": "TN"},
                               [metric("throughput", tf, unit, 0.004, note="2 m n k / time"),
                                metric("time", 2 * m * n * k / tf / 1e9, "ms", 0.004),
                                metric("percent_of_peak", 100 * tf / peak, "%", None)],
                               extra={"dense_peak_tflops": peak}))
    recs.append(record("gemm/fp8_e5m2/m8192_n8192_k8192", "gemm", {"precision": "fp8_e5m2", "m": 8192, "n": 8192,
                                                                    "k": 8192, "layout": "TN"}, [],
                       outcome="not_supported", reason="fixture: cuBLASLt has no E5M2 x E5M2 kernel"))
    hbm = 4800.0
    for op, l2bw, hbmbw in [("read", 4100, 3300), ("copy", 4000, 4150), ("triad", 5000, 4380)]:
        for size in [8 * MIB, 32 * MIB, 128 * MIB, 512 * MIB, GIB, 4 * GIB]:
            in_l2 = size <= 16 * MIB
            bw = (l2bw if in_l2 else hbmbw) * scale.get("mem", 1.0)
            if size == 32 * MIB:
                bw = (l2bw + hbmbw) / 2
            name = f"{size // GIB}GiB" if size >= GIB else f"{size // MIB}MiB"
            recs.append(record(f"memory/{op}/{name}", "memory",
                               {"op": op, "array_bytes": size, "bytes_read": size, "bytes_written": 0 if op == "read"
                                else size, "l2_resident": in_l2},
                               [metric("bandwidth", bw, "GB/s", 0.002, note="bytes read + written per second"),
                                metric("time", size / bw / 1e3, "us", 0.002)],
                               extra={"peak": {"metric": "bandwidth", "figure": "hbm_bandwidth_gbps", "value": hbm,
                                               "unit": "GB/s", "source": "spec DB H200-SXM-141GB (fixture)"}}))
    link = 63.0
    for variant, bw in [("h2d_ce_pinned", 54.8), ("d2h_ce_pinned", 55.2), ("bidir_ce_pinned", 88.3),
                        ("h2d_ce_pageable", 6.0), ("d2h_sm_pinned", 52.3)]:
        for size in [64 * MIB, 512 * MIB]:
            direction = {"h2d": "host_to_device", "d2h": "device_to_host", "bid": "both"}[variant[:3]]
            name = "total_bandwidth" if direction == "both" else "bandwidth"
            v = bw * scale.get("xfer", 1.0) * (0.98 if size == 64 * MIB else 1.0)
            recs.append(record(f"transfer/{variant}/{size // MIB}MiB", "transfer",
                               {"direction": direction, "bytes": size},
                               [metric(name, v, "GB/s", 0.003)],
                               extra={"peak": {"metric": "bandwidth", "figure": "host_link_gbps", "value": link,
                                               "unit": "GB/s", "source": "PCIe gen5 x16 per direction (fixture)"}}))
    recs.append(record("transfer/latency_sm_pinned", "transfer", {"direction": "device_reads_host"},
                       [metric("latency", 1.22, "us", 0.003, samples=10)]))
    # As backends/cuda/benchmarks/p2p.cu writes them.
    for variant, name, bw in [("ce_unidir", "bandwidth", 394.0), ("ce_bidir", "total_bandwidth", 783.0)]:
        for src, dst in [(0, 1), (1, 0)]:
            recs.append(record(f"p2p/{variant}/gpu{src}_to_gpu{dst}/1GiB", "p2p",
                               {"source_gpu": src, "destination_gpu": dst, "bytes": GIB, "path": "nvlink (NV18)"},
                               [metric(name, bw * scale.get("p2p", 1.0) * (1 if src == 0 else 0.995), "GB/s",
                                       0.002)], gpus=(src, dst)))
    recs.append(record("p2p/matrix/1GiB", "p2p", {"bytes": GIB}, [], gpus=(0, 1)))
    for reader, owner in [(0, 1), (1, 0)]:
        recs.append(record(f"p2p/latency_sm/gpu{reader}_reads_gpu{owner}", "p2p",
                           {"reader_gpu": reader, "owner_gpu": owner},
                           [metric("latency", 0.78 + 0.01 * reader, "us", 0.003)], gpus=(reader, owner)))
    # As backends/cuda/benchmarks/collectives.cu writes them: time first, then algbw and busbw.
    for coll, factor, peak in [("all_reduce", 1.0, 346.0), ("all_gather", 0.5, 360.0)]:
        for exp in range(3, 34, 3):
            size = 1 << exp
            busbw = peak * size / (size + 2.0 * MIB) * scale.get("nccl", 1.0)
            if size < 1024:
                busbw = max(busbw, 0.0004 * size)
            algbw = busbw / factor if factor else busbw
            recs.append(record(f"collectives/{coll}/float/oop/{size_name(size)}", "collectives",
                               {"op": coll, "dtype": "float", "bytes": size, "in_place": False, "ranks": 2,
                                "busbw_factor": factor},
                               [metric("time", size / algbw / 1e3, "us", 0.01), metric("algbw", algbw, "GB/s", 0.01),
                                metric("busbw", busbw, "GB/s", 0.01)], gpus=(0, 1)))
    recs.append(record("collectives/alltoall/float/oop/1GiB", "collectives", {"op": "alltoall", "bytes": GIB},
                       [], gpus=(0, 1), outcome="timeout", reason="fixture: watchdog aborted after 60 s"))
    recs = [r for r in recs if r["key"] not in drop]
    if add_extra:
        recs.append(record("memory/write/4GiB", "memory", {"op": "write", "array_bytes": 4 * GIB,
                                                            "bytes_read": 0, "bytes_written": 4 * GIB},
                           [metric("bandwidth", 4690.0, "GB/s", 0.002)]))
    return result(recs, host, commit, created)


def small_run(values, extra_records=()):
    """A few records for compare's golden files: (key, metric, value, unit, rel spread or None, outcome)."""
    recs = []
    for key, name, value, unit, rel, outcome in values:
        samples = 20 if rel is not None else 1
        ms = [] if outcome != "passed" else [metric(name, value, unit, rel, samples=samples)]
        recs.append(record(key, key.split("/")[0], {}, ms, outcome=outcome,
                           reason=None if outcome == "passed" else "fixture: it failed"))
    recs.extend(extra_records)
    return recs


def write(name, doc):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def main():
    write("fixture-run-a.json", full_run({}, "fixture-host-a", "000000000000", "2026-01-01T00:00:00Z"))
    write("fixture-run-b.json",
          full_run({"gemm_bf16": 1.05, "gemm_fp8": 0.97, "mem": 1.001, "xfer": 1.0, "nccl": 1.02}, "fixture-host-b",
                   "111111111111", "2026-01-02T00:00:00Z", drop={"memory/read/8MiB"}, add_extra=True))
    a = small_run([
        ("gemm/bf16/m8192_n8192_k8192", "throughput", 740.0, "TFLOP/s", 0.004, "passed"),  # faster in B
        ("gemm/fp8/m8192_n8192_k8192", "throughput", 1300.0, "TFLOP/s", 0.004, "passed"),  # slower in B
        ("memory/copy/4GiB", "bandwidth", 4150.0, "GB/s", 0.002, "passed"),  # same (overlap)
        ("transfer/latency_sm_pinned", "latency", 1.22, "us", 0.003, "passed"),  # lower is better: faster
        ("collectives/all_reduce/float/oop/8B", "busbw", 0.003, "GB/s", None, "passed"),  # no spread: unknown
        ("p2p/ce_unidir/gpu0_to_gpu1/1GiB", "bandwidth", 394.0, "GB/s", 0.002, "passed"),  # failed in B
        ("memory/read/8MiB", "bandwidth", 4100.0, "GB/s", 0.002, "passed"),  # only in A
    ])
    b = small_run([
        ("gemm/bf16/m8192_n8192_k8192", "throughput", 780.0, "TFLOP/s", 0.004, "passed"),
        ("gemm/fp8/m8192_n8192_k8192", "throughput", 1250.0, "TFLOP/s", 0.004, "passed"),
        ("memory/copy/4GiB", "bandwidth", 4155.0, "GB/s", 0.002, "passed"),
        ("transfer/latency_sm_pinned", "latency", 1.10, "us", 0.003, "passed"),
        ("collectives/all_reduce/float/oop/8B", "busbw", 0.0031, "GB/s", None, "passed"),
        ("p2p/ce_unidir/gpu0_to_gpu1/1GiB", "bandwidth", 0, "GB/s", 0.002, "failed"),
        ("memory/write/4GiB", "bandwidth", 4690.0, "GB/s", 0.002, "passed"),  # only in B
    ])
    write("compare-a.json", result(a, "fixture-host-a", "000000000000", "2026-01-01T00:00:00Z", gpu_count=1))
    write("compare-b.json", result(b, "fixture-host-b", "111111111111", "2026-01-02T00:00:00Z", gpu_count=1))
    newer = result([], "fixture-host", "000000000000", "2026-01-01T00:00:00Z", gpu_count=1)
    newer["schema_version"] = "2.0"
    write("newer-major.json", newer)
    bad = result(a[:1], "fixture-host", "000000000000", "2026-01-01T00:00:00Z", gpu_count=1)
    bad["records"][0]["metrics"][0]["value"] = "fast"
    write("bad-field.json", bad)
    with open(os.path.join(HERE, "invalid.json"), "w") as f:
        f.write('{"schema_version": "1.0", "records": [\n')


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The serve benchmark against its targets (issue 6) and the PyTorch baseline of the same call.

  python3 bench/serve_compare.py serve.json torch_serve.jsonl [serve_peak.json ...]

serve.json: `gpuscout bench --only serve,...` (decode, prefill, static batch records; the BF16
GEMM record of the same run gives throughput_pct_of_gemm). torch_serve.jsonl: the JSON lines of
bench/serve_baseline_torch.py; where it timed a batch with more than one form of decode attention,
the faster form (fewer ms per decode step) is the baseline, and the static batch gets a row against
each other form. Further files: --find-peak runs (their serve/load/.../peak records).
Prints a Markdown table, then the clocks and power each gpuscout figure was measured at; figures
missing from the inputs show as n/a.
"""
import json
import sys


def metric(record, name):
    return next((m["value"] for m in record.get("metrics", []) if m["name"] == name), None)


def serve_records(path):
    with open(path) as f:
        doc = json.load(f)
    return [r for r in doc.get("records", []) if r.get("benchmark") == "serve"], doc


def torch_lines(path):
    """The JSON lines of bench/serve_baseline_torch.py."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def baseline_forms(torch):
    """Each batch's records by decode attention form (files older than the field ran the folded
    one), and each batch's baseline: the faster form (fewer ms per decode step)."""
    forms = {}
    for t in (t for t in torch if t.get("case") == "batch"):
        forms.setdefault(t["batch"], {})[t.get("decode_attention", "folded")] = t
    return forms, {b: min(f.values(), key=lambda t: t["decode_ms_per_step"]) for b, f in forms.items()}


def fmt(x, digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return None if a is None or not b else a / b


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    ours, doc = serve_records(sys.argv[1])
    torch = torch_lines(sys.argv[2])
    forms, tb = baseline_forms(torch)
    tp = {t["tokens"]: t for t in torch if t.get("case") == "prefill"}
    tenv = next((t for t in torch if t.get("case") == "env"), {})
    tcopy = next((t["gbps"] for t in torch if t.get("case") == "copy"), None)
    gpu = (doc.get("gpus") or [{}])[0].get("name", "?")
    print(f"# serve: gpuscout vs PyTorch {tenv.get('torch', '?')} (CUDA graphs), {gpu}, same call\n")

    copy = next((metric(r, "bandwidth") for r in ours if r["key"].startswith("serve/copy/")), None)
    print(f"Copy bandwidth (4 GiB, read + write): gpuscout {fmt(copy, 0)} GB/s, PyTorch copy_ {fmt(tcopy, 0)} GB/s\n")

    print("| case | gpuscout | PyTorch | ratio | target |")
    print("|---|---|---|---|---|")
    for r in ours:
        if r.get("outcome") != "passed" and not r["key"].startswith("serve/engine/"):
            print(f"| {r['key']} | {r.get('outcome')}: {r.get('reason', '')} | | | |")
    for r in sorted((r for r in ours if r["key"].startswith("serve/decode/") and r["outcome"] == "passed"),
                    key=lambda r: r["params"]["batch"]):
        b = r["params"]["batch"]
        t = tb.get(b, {})
        ms, tps, pct = metric(r, "step_time"), metric(r, "throughput"), metric(r, "hbm_roofline_pct")
        target = ">= 85% of roofline" if b == 1 else ""
        print(f"| decode b{b} ctx {r['params']['context_tokens']}: ms/step | {fmt(ms, 2)} | "
              f"{fmt(t.get('decode_ms_per_step'), 2)} | {fmt(ratio(t.get('decode_ms_per_step'), ms), 2)}x faster | |")
        print(f"| decode b{b}: tokens/s | {fmt(tps, 0)} | {fmt(t.get('decode_tokens_per_s'), 0)} | "
              f"{fmt(ratio(tps, t.get('decode_tokens_per_s')), 2)} | |")
        print(f"| decode b{b}: % of HBM roofline | {fmt(pct)} | {fmt(t.get('decode_hbm_roofline_pct'))} | | {target} |")
    for r in (r for r in ours if r["key"].startswith("serve/static/") and r["outcome"] == "passed"):
        b = r["params"].get("batch")
        t = tb.get(b, {})
        otps = metric(r, "output_tokens_per_s")
        print(f"| static b{b} isl {r['params'].get('input_tokens')} osl {r['params'].get('output_tokens')}: "
              f"output tokens/s | {fmt(otps, 0)} | {fmt(t.get('e2e_output_tokens_per_s'), 0)} | "
              f"{fmt(ratio(otps, t.get('e2e_output_tokens_per_s')), 2)} | >= 1.5x PyTorch |")
        print(f"| static b{b}: TTFT p50 / TPOT p50 (ms) | {fmt(metric(r, 'ttft'), 0)} / {fmt(metric(r, 'tpot'), 2)} | "
              f"prefill {fmt(t.get('prefill_ms'), 0)} / step {fmt(t.get('decode_ms_per_step'), 2)} | | |")
        for form, other in sorted(forms.get(b, {}).items()):
            if other is t:
                continue
            print(f"| static b{b}: output tokens/s, PyTorch's slower {form} decode attention | {fmt(otps, 0)} | "
                  f"{fmt(other.get('e2e_output_tokens_per_s'), 0)} | "
                  f"{fmt(ratio(otps, other.get('e2e_output_tokens_per_s')), 2)} | |")
    for r in (r for r in ours if r["key"].startswith("serve/prefill/") and r["outcome"] == "passed"):
        n = r["params"]["prompt_tokens"]
        t = tp.get(n, {})
        tf, ms = metric(r, "throughput"), metric(r, "time")
        # Time is the engine-neutral figure; TFLOP/s counts the FLOPs each side executes (gpuscout's
        # pruned last layer runs fewer: params.flops_formula), so its ratio is hardware efficiency.
        print(f"| prefill {n} tokens: ms | {fmt(ms, 1)} | {fmt(t.get('ms'), 1)} | "
              f"{fmt(ratio(t.get('ms'), ms), 2)}x faster | |")
        print(f"| prefill {n} tokens: TFLOP/s per GPU (executed FLOPs) | {fmt(tf, 0)} | {fmt(t.get('tflops'), 0)} | "
              f"{fmt(ratio(tf, t.get('tflops')), 2)} | |")
        print(f"| prefill {n}: % of the run's BF16 GEMM rate | {fmt(metric(r, 'throughput_pct_of_gemm'))} | | | >= 60% |")
    for path in sys.argv[3:]:
        peaks, _ = serve_records(path)
        for r in (r for r in peaks if r["key"].endswith("/peak")):
            print(f"| {r['key']}: peak rate (requests/s) | {fmt(metric(r, 'peak_rate'), 2)} | | | "
                  f"valid peak ({r.get('outcome')}) |")
    if any(len(f) > 1 for f in forms.values()):
        print("\nPyTorch's decode attention forms, ms per decode step (the baseline is the faster):\n")
        for b in sorted(forms):
            steps = ", ".join(f"{form} {fmt(t['decode_ms_per_step'], 2)}" for form, t in sorted(forms[b].items()))
            print(f"- batch {b}: {steps}; baseline {tb[b].get('decode_attention', 'folded')}")
    # H200s of one kind hold different clocks at the power cap; the record's NVML samples say which
    # kind of card a figure came from, so a slow card is not read as a regression.
    measured = [r for r in ours if r.get("telemetry") and r["outcome"] == "passed" and
                r["key"].split("/")[1] in ("decode", "prefill", "static")]
    if measured:
        print("\nThe card while gpuscout measured (NVML samples of each record):\n")
        print("| case | SM clock, mean (min) MHz | power, mean W | memory used, max GiB | limits reported |")
        print("|---|---|---|---|---|")
        for r in measured:
            t = r["telemetry"]
            print(f"| {r['key']} | {fmt(t.get('sm_clock_mean_mhz'), 0)} ({fmt(t.get('sm_clock_min_mhz'), 0)}) | "
                  f"{fmt(t.get('power_mean_w'), 0)} | {fmt(t.get('memory_used_max_gib'), 1)} | "
                  f"{', '.join(t.get('throttle_reasons') or []) or 'none'} |")


if __name__ == "__main__":
    main()

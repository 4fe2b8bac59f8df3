#!/usr/bin/env python3
"""Ratio table: gpuscout's gemm records against bench/gemm_reference.py's PyTorch timings.

  python3 bench/gemm_compare.py gpuscout.json torch.json [--markdown]
"""
import json
import sys


def load_gpuscout(path):
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for r in doc.get("records", []):
        if r.get("benchmark") != "gemm" or "model" in r.get("params", {}):
            continue
        p = r["params"]
        tp = next((m for m in r.get("metrics", []) if m["name"] == "throughput"), None)
        out[(p["precision"], p["m"], p["n"], p["k"])] = {
            "tflops": tp["value"] if tp else None,
            "outcome": r.get("outcome"),
            "reason": r.get("reason", ""),
            "algo": r.get("extra", {}).get("algorithm", {}),
            "error": r.get("extra", {}).get("verification", {}).get("max_error_vs_rms"),
            "samples": tp["samples"] if tp else 0,
        }
    return doc, out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    _, ours = load_gpuscout(sys.argv[1])
    with open(sys.argv[2]) as f:
        torch_doc = json.load(f)
    theirs = {}
    for r in torch_doc.get("results", []):
        theirs[(r["precision"], r["m"], r["n"], r["k"], r["layout"])] = r
    print(f"# gpuscout gemm vs PyTorch {torch_doc.get('torch')} ({torch_doc.get('cublaslt_library')}) on "
          f"{torch_doc.get('device')}, same call")
    header = ("precision", "m=n=k", "gpuscout TFLOP/s", "torch TN", "ratio", "torch NN", "ratio NN", "gpuscout algo",
              "err/rms")
    rows = []
    for (prec, m, n, k), g in sorted(ours.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if not (m == n == k):
            continue
        tkey = "fp8" if prec == "fp8" else prec
        t_tn = theirs.get((tkey, m, n, k, "TN"), {})
        t_nn = theirs.get((tkey, m, n, k, "NN"), {})
        ours_v = g["tflops"]
        fmt = lambda v: f"{v:.1f}" if isinstance(v, (int, float)) else "-"
        ratio = lambda a, b: f"{a / b:.3f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "-"
        algo = g["algo"]
        algo_s = (f"#{algo.get('heuristic_index')} id{algo.get('algo_id')} {algo.get('tile')} "
                  f"s{algo.get('stages_id')} k{algo.get('split_k')}") if algo else g["outcome"]
        err = g["error"]
        rows.append((prec, str(m), fmt(ours_v) if ours_v else g["outcome"], fmt(t_tn.get("tflops_median")),
                     ratio(ours_v, t_tn.get("tflops_median")), fmt(t_nn.get("tflops_median")),
                     ratio(ours_v, t_nn.get("tflops_median")), algo_s,
                     f"{err:.2g}" if isinstance(err, (int, float)) else "-"))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else [len(h) for h in header]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


if __name__ == "__main__":
    main()

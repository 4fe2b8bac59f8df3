#!/usr/bin/env python3
"""bench/serve_compare.py on committed results: the static batch's ratio against the PyTorch
baseline, whose faster decode attention form is the one compared with."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "bench", "results")
SERVE = os.path.join(RESULTS, "h100-serve-llama-3.1-8b-s30-20261207.json")
TORCH = os.path.join(RESULTS, "h100-serve-torch-baseline-s30-20261207.jsonl")


def static_output_tokens_per_s():
    with open(SERVE) as f:
        doc = json.load(f)
    record = next(r for r in doc["records"] if r["key"].startswith("serve/static/"))
    return next(m["value"] for m in record["metrics"] if m["name"] == "output_tokens_per_s")


def compare(torch_lines):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("\n".join(json.dumps(x) for x in torch_lines) + "\n")
    try:
        out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "serve_compare.py"), SERVE, f.name],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    return [line for line in out.splitlines() if line.startswith("| static b32")]


def cells(row):
    return [c.strip() for c in row.strip("|").split("|")]


class ServeCompareTest(unittest.TestCase):
    def setUp(self):
        with open(TORCH) as f:
            self.torch = [json.loads(line) for line in f if line.strip().startswith("{")]
        self.folded = next(t for t in self.torch if t.get("case") == "batch" and t["batch"] == 32)
        self.ours = static_output_tokens_per_s()

    def main_ratio(self, rows):
        return cells(next(r for r in rows if "output tokens/s |" in r and "slower" not in r))[3]

    def test_one_form_one_ratio(self):
        rows = compare(self.torch)
        self.assertFalse(any("slower" in r for r in rows), rows)
        self.assertEqual(self.main_ratio(rows), f"{self.ours / self.folded['e2e_output_tokens_per_s']:.2f}")

    def test_the_faster_form_is_the_baseline(self):
        plain = dict(self.folded, decode_attention="sdpa_gqa", e2e_output_tokens_per_s=3000.0,
                     decode_ms_per_step=self.folded["decode_ms_per_step"] - 1.0)
        for order in ([plain] + self.torch, self.torch + [plain]):
            rows = compare(order)
            self.assertEqual(self.main_ratio(rows), f"{self.ours / 3000.0:.2f}")
            slower = cells(next(r for r in rows if "slower folded" in r))
            self.assertEqual(slower[3], f"{self.ours / self.folded['e2e_output_tokens_per_s']:.2f}")

    def test_a_slower_form_gets_its_own_row(self):
        plain = dict(self.folded, decode_attention="sdpa_gqa", e2e_output_tokens_per_s=2000.0,
                     decode_ms_per_step=self.folded["decode_ms_per_step"] + 2.0)
        rows = compare(self.torch + [plain])
        self.assertEqual(self.main_ratio(rows), f"{self.ours / self.folded['e2e_output_tokens_per_s']:.2f}")
        slower = cells(next(r for r in rows if "slower sdpa_gqa" in r))
        self.assertEqual(slower[2], "2000")
        self.assertEqual(slower[3], f"{self.ours / 2000.0:.2f}")


if __name__ == "__main__":
    unittest.main()

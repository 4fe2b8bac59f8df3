#!/usr/bin/env python3
"""bench/decode_floor.py on a committed kernel timeline: the sums of one decode batch's kernels by
kind, the floor, the roofline and the static batch at each."""
import json
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "decode_floor.py")
# One H100's batch-32 decode steps (group 15): five cuBLASLt kernels, the pair attention kernel and
# five small ones, as the file lists them.
TRACE = os.path.join(ROOT, "bench", "results", "h100-kernel-trace-pairs1-v3-s30-20261207.txt")
# Another H100's serve run beside PyTorch (both decode attention forms) in one call.
SERVE = os.path.join(ROOT, "bench", "results", "h100-80gb-hbm3-serve-both-forms-s33-20261207.json")
TORCH = os.path.join(ROOT, "bench", "results", "h100-80gb-hbm3-serve-torch-baseline-both-forms-s33-20261207.jsonl")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class DecodeFloorTest(unittest.TestCase):
    def test_sums_floor_and_static_batch(self):
        out = run(TRACE, "--group", "15", "--kv-gb", "3.0", "--copy-gbps", "3000", "--prefill-ms", "300",
                  "--steps", "100", "--baseline-s", "1.2")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], "group 15: step 6.777 ms, 11 kernels")
        # 2.680 + 1.341 + 0.647 + 0.440 + 0.344 (the LM head)
        self.assertIn("GEMMs (cuBLASLt, split-k reductions, ours) 5.452 ms", lines[1])
        self.assertIn("decode attention 0.955 ms", lines[2])
        # 0.137 + 0.133 + 0.083 + 0.009 + 0.004
        self.assertIn("the rest 0.366 ms", lines[3])
        self.assertEqual(lines[4], "K/V of 3.000 GB at the copy rate: 1.000 ms")
        self.assertIn("floor (GEMMs + K/V at the copy rate): 6.452 ms", lines[5])
        # 300 + 100 x 6.452 = 945.2 ms; 1.2 / 0.9452 = 1.27
        self.assertEqual(lines[6], "static batch at the floor: 300 ms + 100 x 6.452 ms = 0.945 s, "
                                   "1.27x a baseline of 1.200 s")
        self.assertEqual(len(lines), 7)  # no roofline without --weight-gb

    def test_roofline(self):
        out = run(TRACE, "--group", "15", "--kv-gb", "3.0", "--copy-gbps", "3000", "--weight-gb", "15.0",
                  "--prefill-ms", "300", "--steps", "100", "--baseline-s", "1.2")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        # (15 + 3) GB / 3000 GB/s = 6.000 ms of a 6.777 ms step; 5 ms of weights against 5.452 ms of GEMMs
        self.assertEqual(lines[6], "roofline (weights 15.000 GB + K/V at the copy rate): 6.000 ms, 88.5% of "
                                   "the traced step; the GEMMs at 91.7% of the copy rate")
        self.assertEqual(lines[7], "static batch at the floor: 300 ms + 100 x 6.452 ms = 0.945 s, "
                                   "1.27x a baseline of 1.200 s")
        # 300 + 100 x 6 = 900 ms; 1.2 / 0.9 = 1.33
        self.assertEqual(lines[8], "static batch at the roofline: 300 ms + 100 x 6.000 ms = 0.900 s, "
                                   "1.33x a baseline of 1.200 s")

    def test_inputs_from_result_files(self):
        out = run(TRACE, "--group", "15", "--serve-json", SERVE, "--torch-jsonl", TORCH)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(SERVE) as f:
            records = json.load(f)["records"]
        case = next(r for r in records if r["key"].startswith("serve/decode/") and r["params"]["batch"] == 32)
        static = next(r for r in records if r["key"].startswith("serve/static/"))
        ttft = next(m["value"] for m in static["metrics"] if m["name"] == "ttft")
        with open(TORCH) as f:
            forms = [json.loads(x) for x in f if '"case": "batch"' in x]
        faster = min((x for x in forms if x["batch"] == 32), key=lambda x: x["decode_ms_per_step"])
        self.assertEqual(faster["decode_attention"], "sdpa_gqa")
        # The static batch's steps attend to 513..639 tokens: the 512-token case's K/V x 576 / 512.
        kv_gb = case["params"]["kv_bytes_read_per_step"] / 1e9 * 576 / 512
        floor = 5.452 + kv_gb / case["params"]["copy_bandwidth_gbps"] * 1e3
        static_s = (ttft + 127 * floor) / 1e3
        self.assertIn(f"K/V of {kv_gb:.3f} GB at the copy rate", out.stdout)
        self.assertIn(f"floor (GEMMs + K/V at the copy rate): {floor:.3f} ms", out.stdout)
        self.assertIn(f"= {static_s:.3f} s, {faster['e2e_s'] / static_s:.2f}x a baseline of {faster['e2e_s']:.3f} s",
                      out.stdout)
        # The roofline takes the decode case's weight bytes.
        weight_gb = case["params"]["weight_bytes_read_per_step"] / 1e9
        roofline = (weight_gb + kv_gb) / case["params"]["copy_bandwidth_gbps"] * 1e3
        self.assertIn(f"roofline (weights {weight_gb:.3f} GB + K/V at the copy rate): {roofline:.3f} ms", out.stdout)
        self.assertIn(f"static batch at the roofline: {ttft:.0f} ms + 127 x {roofline:.3f} ms", out.stdout)

    def test_steps_apart_are_another_group(self):
        back_to_back = run(TRACE, "--group", "4", "--kv-gb", "0", "--copy-gbps", "1")
        apart = run(TRACE, "--group", "4", "--order", "apart", "--kv-gb", "0", "--copy-gbps", "1")
        self.assertNotEqual(back_to_back.returncode, 0)
        self.assertIn("no summary group 4 (back to back)", back_to_back.stderr)
        self.assertEqual(apart.returncode, 0, apart.stderr)

    def test_bad_input_is_named(self):
        missing = run(TRACE, "--group", "999", "--kv-gb", "1", "--copy-gbps", "1000")
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("h100-kernel-trace-pairs1-v3-s30-20261207.txt: no summary group 999", missing.stderr)
        bad_rate = run(TRACE, "--group", "15", "--kv-gb", "1", "--copy-gbps", "0")
        self.assertNotEqual(bad_rate.returncode, 0)
        self.assertIn("--copy-gbps", bad_rate.stderr)
        bad_weights = run(TRACE, "--group", "15", "--kv-gb", "1", "--copy-gbps", "1000", "--weight-gb", "0")
        self.assertNotEqual(bad_weights.returncode, 0)
        self.assertIn("--weight-gb", bad_weights.stderr)
        no_inputs = run(TRACE, "--group", "15")
        self.assertNotEqual(no_inputs.returncode, 0)
        self.assertIn("--serve-json", no_inputs.stderr)
        not_json = run(TRACE, "--group", "15", "--serve-json", TRACE)
        self.assertNotEqual(not_json.returncode, 0)
        self.assertIn("h100-kernel-trace-pairs1-v3-s30-20261207.txt: not a readable result file", not_json.stderr)
        no_batch = run(TRACE, "--group", "15", "--serve-json", SERVE, "--batch", "3")
        self.assertNotEqual(no_batch.returncode, 0)
        self.assertIn("no serve/decode/ record of batch 3", no_batch.stderr)


if __name__ == "__main__":
    unittest.main()

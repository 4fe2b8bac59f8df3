#!/usr/bin/env python3
"""scripts/make-calibration.py: it rebuilds the embedded H200 table from the files that table lists,
and a directory mixing in another GPU's result files and JSON that is no result set gives the same
table (those are left out, as calibration_from_results leaves them out)."""
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "make-calibration.py")
TABLE = os.path.join(ROOT, "data", "calibration", "h200.toml")
# Another GPU's measured GEMMs and HBM arrays (an H100, session 28), and a doctor report (a JSON list).
OTHER_GPU = ["h100-gemm-decode-s28-20261207.json", "h100-memory-s28-20261207.json"]
NOT_A_RESULT_SET = "h100-80gb-hbm3-doctor-s32-20261207.json"


def figures(path):
    """The table without the lines that name commits and files (they differ by checkout)."""
    with open(path, "rb") as f:
        table = tomllib.load(f)
    for key in ("source", "repo_commit", "tool_commits", "files"):
        table["calibration"].pop(key)
    return table


def make(out, *args):
    return subprocess.run([sys.executable, SCRIPT, "--out", out, *args], capture_output=True, text=True)


class MakeCalibrationTest(unittest.TestCase):
    def setUp(self):
        with open(TABLE, "rb") as f:
            self.files = [os.path.join(ROOT, p) for p in tomllib.load(f)["calibration"]["files"]]
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_rebuilds_the_embedded_table_from_its_files(self):
        out = os.path.join(self.tmp, "h200.toml")
        run = make(out, *self.files)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(f"from {len(self.files)} files", run.stdout)
        self.assertEqual(figures(out), figures(TABLE))

    def test_leaves_out_other_gpus_and_files_that_are_not_result_sets(self):
        extra = [os.path.join(ROOT, "bench", "results", f) for f in OTHER_GPU + [NOT_A_RESULT_SET]]
        for path in extra:
            self.assertTrue(os.path.exists(path), path)
        out = os.path.join(self.tmp, "h200.toml")
        run = make(out, *self.files, *extra)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(f"from {len(self.files)} files", run.stdout)
        self.assertEqual(figures(out), figures(TABLE))
        # The H100's files do make a table of their own, named after the spec's GPU.
        h100 = os.path.join(self.tmp, "h100.toml")
        run = make(h100, "--spec", os.path.join(ROOT, "data", "gpus", "h100-sxm5-80gb.toml"), *extra)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("from 2 files", run.stdout)
        with open(h100, "rb") as f:
            table = tomllib.load(f)
        self.assertEqual(table["calibration"]["gpu"], "H100-SXM5-80GB")
        self.assertEqual(table["calibration"]["bandwidth_gbs"], 3350)
        self.assertIn("bf16", table["gemm"])


if __name__ == "__main__":
    unittest.main()

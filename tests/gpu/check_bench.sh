#!/usr/bin/env bash
# GPU test runner. Usage: check_bench.sh GPUSCOUT devices|memory|transfer|doctor
# Exit 77 (skipped) when no GPU can be used, 0 when the checks pass, 1 otherwise.
set -u
bin=$1
what=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" devices --format json >"$tmp/devices.json" 2>"$tmp/devices.err"
if [ ! -s "$tmp/devices.json" ]; then
  echo "SKIP: no usable GPU: $(cat "$tmp/devices.err")"
  exit 77
fi

check() {  # check RESULT.json PYTHON-CHECKS
  python3 - "$1" <<PY
import json, sys
res = json.load(open(sys.argv[1]))
recs = res["records"]
fail = []
def rec(key):
    for r in recs:
        if r["key"] == key: return r
    fail.append(f"missing record {key}"); return None
def value(key, name):
    r = rec(key)
    if r is None: return None
    for m in r["metrics"]:
        if m["name"] == name: return m["value"]
    fail.append(f"{key}: no metric {name}")
def in_range(key, name, lo, hi):
    v = value(key, name)
    if v is not None and not (lo <= v <= hi): fail.append(f"{key} {name} = {v} outside [{lo}, {hi}]")
assert res["schema_version"].startswith("1."), res["schema_version"]
assert res["complete"] is True
for r in recs:
    if r["outcome"] != "passed": fail.append(f"{r['key']}: {r['outcome']} {r['reason']}")
    elif r.get("extra", {}).get("verified") is not True: fail.append(f"{r['key']}: not verified")
$2
if fail:
    print("\n".join(fail)); sys.exit(1)
print(f"ok: {len(recs)} records verified")
PY
}

case "$what" in
  devices)
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d)>=1 and d[0]["name"] and d[0]["sm_count"]>0, d' \
      "$tmp/devices.json" || exit 1
    ;;
  memory)
    "$bin" bench --quick --only memory --memory-sizes 8MiB,256MiB --out "$tmp/r.json" >"$tmp/out.txt" 2>"$tmp/err.txt"
    rc=$?
    [ $rc -eq 0 ] || { echo "bench exit $rc"; cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
    # Sane on any GPU from a laptop part (~100 GB/s) to HBM3e parts (< 10 TB/s); L2 may be faster.
    check "$tmp/r.json" '
for op in ("read", "write", "copy", "triad", "ce_copy"):
    in_range(f"memory/{op}/256MiB", "bandwidth", 50, 12000)
    in_range(f"memory/{op}/8MiB", "bandwidth", 20, 40000)
# An L2-resident size is repeated inside the kernel, so it shows the L2, faster than device memory.
for op in ("read", "copy"):
    small = rec(f"memory/{op}/8MiB")
    if small is None or not small["params"].get("l2_resident"): continue
    if small["params"].get("passes_per_launch", 1) < 2: fail.append(f"memory/{op}/8MiB: not repeated in the kernel")
    l2, hbm = value(f"memory/{op}/8MiB", "bandwidth"), value(f"memory/{op}/256MiB", "bandwidth")
    if l2 is not None and hbm is not None and l2 <= hbm: fail.append(f"{op}: L2 {l2} GB/s not above HBM {hbm}")' || exit 1
    ;;
  transfer)
    "$bin" bench --quick --only transfer --transfer-sizes 64MiB --out "$tmp/r.json" >"$tmp/out.txt" 2>"$tmp/err.txt"
    rc=$?
    [ $rc -eq 0 ] || { echo "bench exit $rc"; cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
    check "$tmp/r.json" '
for c in ("h2d_ce_pinned", "d2h_ce_pinned", "h2d_sm_pinned", "d2h_sm_pinned", "h2d_ce_pageable", "d2h_ce_pageable"):
    in_range(f"transfer/{c}/64MiB", "bandwidth", 0.5, 1000)
in_range("transfer/bidir_ce_pinned/64MiB", "total_bandwidth", 0.5, 2000)
in_range("transfer/latency_sm_pinned", "latency", 0.05, 100)' || exit 1
    ;;
  doctor)
    # doctor on this GPU: every GPU has its code and spec findings, nothing fails on a healthy machine,
    # and a variable that skews timings is a warning that bench keeps in its result's provenance.
    CUDA_LAUNCH_BLOCKING=1 "$bin" --no-history doctor --format json >"$tmp/doctor.json" 2>"$tmp/err.txt"
    rc=$?
    [ $rc -eq 0 ] || { echo "doctor exit $rc"; cat "$tmp/doctor.json" "$tmp/err.txt"; exit 1; }
    python3 - "$tmp/doctor.json" "$tmp/devices.json" <<'PY' || exit 1
import json, sys
findings, devices = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
by_key = {f["key"]: f for f in findings}
fail = []
for d in devices:
    for check in ("code", "spec"):
        if f"gpu{d['index']}/{check}" not in by_key: fail.append(f"no gpu{d['index']}/{check} finding")
    # With NVML (its persistence reading is there) each GPU's CPU affinity is judged or skipped.
    if f"gpu{d['index']}/persistence_mode" in by_key and f"gpu{d['index']}/cpu_affinity" not in by_key:
        fail.append(f"no gpu{d['index']}/cpu_affinity finding")
if by_key.get("driver/cuda", {}).get("status") != "ok": fail.append(f"driver/cuda: {by_key.get('driver/cuda')}")
if by_key.get("env/CUDA_LAUNCH_BLOCKING", {}).get("status") != "warn": fail.append("CUDA_LAUNCH_BLOCKING=1 not a warning")
if fail: print("\n".join(fail)); sys.exit(1)
print(f"ok: {len(findings)} findings, " + ", ".join(f"{f['key']} {f['status']}" for f in findings if f["status"] != "ok"))
PY
    CUDA_LAUNCH_BLOCKING=1 "$bin" --no-history bench --quick --only memory/copy/8MiB --memory-sizes 8MiB --out "$tmp/r.json" \
      >"$tmp/out.txt" 2>"$tmp/err.txt"
    rc=$?
    [ $rc -eq 0 ] || { echo "bench exit $rc"; cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
    grep -q "doctor env/CUDA_LAUNCH_BLOCKING" "$tmp/err.txt" || { echo "bench did not warn:"; cat "$tmp/err.txt"; exit 1; }
    check "$tmp/r.json" '
if not any(c["key"] == "env/CUDA_LAUNCH_BLOCKING" and c["status"] == "warn" for c in res["provenance"]["checks"]):
    fail.append("provenance.checks lacks env/CUDA_LAUNCH_BLOCKING: " + str(res["provenance"]["checks"]))' || exit 1
    ;;
  *) echo "unknown check $what"; exit 2 ;;
esac
echo "ok: $what"

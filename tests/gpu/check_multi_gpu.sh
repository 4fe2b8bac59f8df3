#!/usr/bin/env bash
# Multi-GPU test runner. Usage: check_multi_gpu.sh GPUSCOUT WHAT [HAVE_MPI]
#   WHAT: topo | p2p | collectives | watchdog | mpi | mpi_dead_rank
# Exit 77 (skipped) with fewer than 2 GPUs (or, for the mpi cases, without MPI / mpirun), 0 when the
# checks pass, 1 otherwise.
set -u
bin=$1
what=$2
have_mpi=${3:-OFF}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" devices --format json >"$tmp/devices.json" 2>"$tmp/devices.err"
count=$(python3 -c 'import json,sys
try: print(len(json.load(open(sys.argv[1]))))
except Exception: print(0)' "$tmp/devices.json")
if [ "$count" -lt 2 ]; then
  echo "SKIP: needs 2 GPUs, found $count $(cat "$tmp/devices.err")"
  exit 77
fi
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
mpi() { mpirun -np 2 --bind-to none -x LD_LIBRARY_PATH -x PATH "$@"; }

check() {  # check RESULT.json PYTHON-CHECKS
  python3 - "$1" <<PY
import json, sys
res = json.load(open(sys.argv[1]))
recs = res["records"]
fail = []
def metric(r, name):
    for m in r["metrics"]:
        if m["name"] == name: return m["value"]
    return None
$2
if fail:
    print("\n".join(fail)); sys.exit(1)
print(f"ok: {len(recs)} records")
PY
}

all_passed='
for r in recs:
    if r["outcome"] != "passed": fail.append(r["key"] + ": " + r["outcome"] + " " + r["reason"])
    elif "verified" in r.get("extra", {}) and r["extra"]["verified"] is not True: fail.append(r["key"] + ": not verified")
'
coll_checks='
keys = [r["key"] for r in recs]
for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv"):
    if not any(k.startswith(f"collectives/{op}/") for k in keys): fail.append("no records for " + op)
for r in recs:
    if r["key"].endswith("/1MiB"):
        b = metric(r, "busbw")
        if b is None or not (0.1 < b < 5000): fail.append(r["key"] + ": busbw " + str(b))
    if r.get("extra", {}).get("wrong_values", 0) != 0: fail.append(r["key"] + " has wrong values")
if "nccl" not in res["provenance"]["software"]: fail.append("no NCCL version in provenance")
# The algorithm/protocol NCCL chose, through the gpuscout profiler plugin (NCCL >= 2.23 has the interface).
nccl = tuple(int(x) for x in res["provenance"]["software"].get("nccl", "0.0").split(".")[:2])
for r in recs:
    e = r.get("extra", {})
    op = r["key"].split("/")[1]
    if op in ("alltoall", "sendrecv"):
        if e.get("algorithm") != "unknown" or "point-to-point" not in e.get("nccl_choice_unknown_reason", ""):
            fail.append(r["key"] + ": send/recv should have no algorithm, with the reason")
    elif nccl >= (2, 23) and (e.get("algorithm") in (None, "unknown") or e.get("protocol") in (None, "unknown")
                              or not isinstance(e.get("channels"), int)):
        fail.append(r["key"] + ": algorithm/protocol/channels not recorded: " + str(e.get("nccl_choice_unknown_reason")))
if "links" not in res["topology"]: fail.append("no topology.links")
'
ops=all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv

case "$what" in
  topo)
    "$bin" topo >"$tmp/topo.txt" 2>&1 || { cat "$tmp/topo.txt"; exit 1; }
    "$bin" topo --format json >"$tmp/topo.json" || exit 1
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert t["gpu_count"]>=2 and t["matrix"][0][0]=="X", t' \
      "$tmp/topo.json" || exit 1
    ;;
  p2p)
    "$bin" bench --quick --only p2p --p2p-sizes 64MiB --out "$tmp/r.json" >"$tmp/out.txt" 2>"$tmp/err.txt"
    rc=$?
    [ $rc -eq 0 ] || { echo "bench exit $rc"; cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
    check "$tmp/r.json" "$all_passed"'
for r in recs:
    if "/ce_write/" in r["key"] and not (1 < metric(r, "bandwidth") < 5000): fail.append(r["key"] + " bandwidth")
if not any(r["key"].startswith("p2p/matrix/") for r in recs): fail.append("no matrix record")' || exit 1
    ;;
  collectives)
    "$bin" bench --quick --only collectives --coll-sizes 8,1MiB,64MiB --coll-ops $ops --coll-dtypes float,bf16 \
      --out "$tmp/r.json" >"$tmp/out.txt" 2>"$tmp/err.txt"
    rc=$?
    [ $rc -eq 0 ] || { echo "bench exit $rc"; cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
    check "$tmp/r.json" "$all_passed$coll_checks" || exit 1
    ;;
  watchdog)
    # One rank is left out of the first collective: the watchdog must abort it within the timeout.
    start=$(date +%s)
    timeout 60 "$bin" bench --only collectives --coll-ops all_reduce --coll-sizes 1MiB --coll-timeout 3 \
      --coll-inject-hang 1 --out "$tmp/r.json" >"$tmp/out.txt" 2>"$tmp/err.txt"
    rc=$?
    took=$(( $(date +%s) - start ))
    [ $rc -eq 1 ] || { echo "expected exit 1, got $rc after ${took}s"; cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
    grep -q "timed out" "$tmp/err.txt" || { echo "no timeout message"; cat "$tmp/err.txt"; exit 1; }
    check "$tmp/r.json" '
if not any(r["outcome"] == "timeout" and "1MiB" in r["reason"] for r in recs): fail.append("no timeout record")
if res["complete"]: fail.append("complete should be false")' || exit 1
    ;;
  mpi | mpi_dead_rank)
    if [ "$have_mpi" != ON ] || ! command -v mpirun >/dev/null; then
      echo "SKIP: gpuscout built without MPI or no mpirun"
      exit 77
    fi
    if [ "$what" = mpi ]; then
      mpi "$bin" bench --quick --only collectives --coll-sizes 8,1MiB,64MiB --coll-ops $ops \
        --out "$tmp/r.json" >"$tmp/out.txt" 2>"$tmp/err.txt"
      rc=$?
      [ $rc -eq 0 ] || { echo "mpirun exit $rc"; cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
      check "$tmp/r.json" "$all_passed$coll_checks"'
if len(res["topology"].get("ranks", [])) != 2: fail.append("rank table should have 2 ranks")
for r in recs:
    if r["extra"].get("ranks_merged") != 2: fail.append(r["key"] + " not merged over 2 ranks")' || exit 1
    else
      start=$(date +%s)
      timeout 90 mpirun -np 2 --bind-to none -x LD_LIBRARY_PATH -x PATH "$bin" bench --only collectives \
        --coll-ops all_reduce --coll-sizes 1MiB --coll-timeout 20 --coll-inject-hang 1 --out "$tmp/r.json" \
        >"$tmp/out.txt" 2>"$tmp/err.txt"
      rc=$?
      took=$(( $(date +%s) - start ))
      echo "dead rank: exit $rc after ${took}s"
      [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
      [ "$took" -lt 85 ] || { echo "took too long"; exit 1; }
    fi
    ;;
  *) echo "unknown check $what"; exit 2 ;;
esac
echo "ok: $what"

#!/usr/bin/env bash
# One call on the 2x H200 machine (kind nvidia-h200-x2) for issue #4's leftovers:
#   1. the algorithm, protocol and channels NCCL chose per collective and size, read by gpuscout's
#      NCCL profiler plugin, one process for both GPUs and under mpirun -np 2 (first a smoke run
#      with NCCL_DEBUG=INFO, whose log says whether NCCL loaded the plugin);
#   2. all_reduce 8 B..64 KiB: 3 back-to-back runs each way with the default timing (>= 0.05 s timed
#      per case), and 2 with --quick (2 samples of 20 ops, the short window of earlier runs);
#   3. A/B: all_reduce 8 B, 1 GiB and 8 GiB with the plugin on and off (--coll-nccl-profiler),
#      alternated on/off/on/off in one process, and on/off under mpirun.
# Usage, repository root there:  DIST=.devdist-algo bash bench/run_collectives_algo_h200x2.sh
# Leaves under $OUT: algo-single.json, algo-mpi.json (the tool's results), summary.md (the tables
# bench/collectives_algo_summary.py makes), steps.txt and all.tar.gz (every result file and log).
set -uo pipefail
FINAL=${OUT:-$PWD/out}
W=$(mktemp -d)
mkdir -p "$FINAL"
source bench/dist_env.sh
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
step() { echo "== $1: exit $2 after $(($(date +%s) - $3)) s" | tee -a "$W/steps.txt"; }
single() { timeout "$1" "$bin" -v bench --only collectives "${@:2}" 2>>"$W/log.txt" >/dev/null; }
mpi() {
  timeout "$1" mpirun -np 2 --bind-to none -x LD_LIBRARY_PATH -x PATH "$bin" -v bench --only collectives "${@:2}" \
    2>>"$W/log.txt" >/dev/null
}
tags=machine:nvidia-h200-x2
{
  date -u
  "$bin" --version
  ls -l "$DIST"
  ldd "$bin" | grep -E 'nccl|mpi'
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
  nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
} >"$W/env.txt" 2>&1

s=$(date +%s)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV timeout 60 "$bin" -v bench --quick --only collectives --coll-ops all_reduce \
  --coll-sizes 8 --out "$W/smoke.json" >"$W/smoke.txt" 2>&1
step "smoke, NCCL_DEBUG=INFO" $? "$s"
grep -i -E "profiler|NCCL version" "$W/smoke.txt" | sort -u | head -12

ops=all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv
algo_sizes=8,64,512,4KiB,32KiB,256KiB,2MiB,16MiB,128MiB,1GiB
s=$(date +%s)
single 100 --coll-ops $ops --coll-sizes $algo_sizes --out "$W/algo-single.json" --tags $tags,mode:single_process
step "algorithm survey, one process" $? "$s"
s=$(date +%s)
mpi 100 --coll-ops $ops --coll-sizes $algo_sizes --out "$W/algo-mpi.json" --tags $tags,mode:mpi
step "algorithm survey, mpirun -np 2" $? "$s"

lat_sizes=8,16,32,64,128,256,512,1KiB,2KiB,4KiB,8KiB,16KiB,32KiB,64KiB
for i in 1 2 3; do
  s=$(date +%s)
  single 40 --coll-ops all_reduce --coll-sizes $lat_sizes --out "$W/lat-single-$i.json" --tags $tags,mode:single_process
  step "latency run $i, one process" $? "$s"
done
for i in 1 2 3; do
  s=$(date +%s)
  mpi 40 --coll-ops all_reduce --coll-sizes $lat_sizes --out "$W/lat-mpi-$i.json" --tags $tags,mode:mpi
  step "latency run $i, mpirun" $? "$s"
done
for i in 1 2; do
  s=$(date +%s)
  single 40 --quick --coll-ops all_reduce --coll-sizes $lat_sizes --out "$W/lat-quick-single-$i.json" \
    --tags $tags,mode:single_process
  step "latency run $i, one process, --quick" $? "$s"
done

n=0
for p in on off on off; do
  n=$((n + 1))
  s=$(date +%s)
  single 60 --coll-ops all_reduce --coll-sizes 8,1GiB,8GiB --coll-nccl-profiler $p --out "$W/ab-single-$n-$p.json" \
    --tags $tags,mode:single_process,nccl_profiler:$p
  step "A/B $n plugin $p, one process" $? "$s"
done
for p in on off; do
  s=$(date +%s)
  mpi 60 --coll-ops all_reduce --coll-sizes 8,1GiB,8GiB --coll-nccl-profiler $p --out "$W/ab-mpi-$p.json" \
    --tags $tags,mode:mpi,nccl_profiler:$p
  step "A/B plugin $p, mpirun" $? "$s"
done

python3 bench/collectives_algo_summary.py "$W" >"$W/summary.md" 2>&1
cat "$W/summary.md" "$W/steps.txt"
cp "$W/summary.md" "$W/steps.txt" "$FINAL/"
cp "$W/algo-single.json" "$W/algo-mpi.json" "$FINAL/" 2>/dev/null
tar -czf "$FINAL/all.tar.gz" -C "$W" .

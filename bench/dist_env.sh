# Sourced by the bench/run_*.sh scripts on the GPU machine: the carried binary and its libraries.
# DIST (default .devdist) is the folder `scripts/make-device-dist.sh BUILD_DIR DIST` makes here and
# the device call carries (it must be git-ignored: /.devdist*/). Sets $bin (absolute path) and
# LD_LIBRARY_PATH; stops the script when the binary does not run there.
DIST=${DIST:-.devdist}
export LD_LIBRARY_PATH="$PWD/$DIST/lib:${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64"
bin="$PWD/$DIST/gpuscout"
if ! "$bin" --version >/dev/null 2>&1; then
  echo "the carried binary $bin does not run here (make it with scripts/make-device-dist.sh, carry $DIST):"
  "$bin" --version 2>&1 | tail -3
  [ -e "$bin" ] && ldd "$bin" | grep "not found"
  exit 1
fi

# Puts the cuBLASLt that PyTorch loads first on the library path, so gpuscout's GEMMs and the
# PyTorch reference in the same call run the same library build.
use_torch_cublaslt() {
  local lt
  lt=$(python3 -c 'import torch
a = torch.ones(64, 64, device="cuda"); (a @ a).sum().item()
print(next(l.split()[-1] for l in open("/proc/self/maps") if "libcublasLt" in l))' 2>/dev/null)
  if [ -n "$lt" ]; then
    export LD_LIBRARY_PATH="$(dirname "$lt"):$LD_LIBRARY_PATH"
    echo "cuBLASLt: $lt (PyTorch's)" >&2
  fi
}

# run_logged LOGDIR SUMMARY NAME LIMIT COMMAND...: COMMAND under `timeout LIMIT`, its output in
# LOGDIR/NAME.txt, then "NAME: exit RC (S s)" on stdout and appended to SUMMARY.
run_logged() {
  local dir=$1 summary=$2 name=$3 limit=$4 s
  shift 4
  s=$(date +%s)
  timeout "$limit" stdbuf -oL "$@" >"$dir/$name.txt" 2>&1
  echo "$name: exit $? ($(($(date +%s) - s)) s)" | tee -a "$summary"
}

# write_env FILE: the date, the GPUs' clocks, power and temperature, and the NCCL/NVSHMEM/torch
# settings of the environment, the header every run's logs start with.
write_env() {
  {
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
      --format=csv
    env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
  } >"$1" 2>&1
}

# engine_ab MODEL ROUNDS PATTERN: `infer_engine_test --bench MODEL` of the previous build
# ($DIST/old/infer_engine_test) and of this one ($DIST/infer_engine_test), interleaved ROUNDS times,
# each run's lines that match PATTERN under an "== engine timing MODEL old|new, round N" header.
engine_ab() {
  local model=$1 rounds=$2 pattern=$3 round build exe
  for round in $(seq "$rounds"); do
    for build in old new; do
      exe="$DIST/infer_engine_test"
      [ "$build" = old ] && exe="$DIST/old/infer_engine_test"
      echo "== engine timing $model $build, round $round"
      "$exe" --bench "$model" | grep -E "$pattern"
    done
  done
}

# engine_ab_switch VAR ROUNDS PATTERN: `infer_engine_test --bench llama-3.1-8b` with the environment
# switch VAR=0, then VAR=1, interleaved ROUNDS times, each run's lines that match PATTERN (cut at 400
# characters) under an "== engine timing VAR=0|1, round N" header.
engine_ab_switch() {
  local var=$1 rounds=$2 pattern=$3 round value
  for round in $(seq "$rounds"); do
    for value in 0 1; do
      echo "== engine timing $var=$value, round $round"
      env "$var=$value" "$DIST/infer_engine_test" --bench llama-3.1-8b 2>&1 | grep -E "$pattern" | cut -c1-400
    done
  done
}

# decode_attention_stalls KERNEL_REGEX FILE [--decode-profile ARGS...]: Nsight Compute on the third
# launch of `infer_kernels_test --decode-profile ARGS` whose kernel name matches KERNEL_REGEX, at the
# card's own clocks (ncu locks them to base by default): throughput, occupancy, instructions and the
# warps' stall cycles per issued instruction by reason, all of it in FILE and a summary on stdout.
# "no ncu on this machine" where there is none.
decode_attention_stalls() {
  local regex=$1 file=$2
  shift 2
  if ! command -v ncu >/dev/null; then
    echo "no ncu on this machine" | tee "$file"
    return
  fi
  timeout 300 ncu --clock-control none --kernel-name "regex:$regex" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum" \
    "$DIST/infer_kernels_test" --decode-profile "$@" >"$file" 2>&1
  echo "ncu exit code: $?" >>"$file"
  grep -E "Duration|DRAM Throughput|Eligible|Active Warps|stalled|inst_executed|ncu exit|ERR" "$file" |
    awk '!/stalled/ || $NF + 0 >= 0.05' | head -40
}

# prefill_kernels_ab ROUNDS: each kernel of a 16 x 512 prefill step timed alone
# (infer_kernels_test --prefill-step-bench) of the previous build ($DIST/old/infer_kernels_test) and
# of this one, interleaved ROUNDS times, under "== prefill-step kernels old|new, round N" headers.
prefill_kernels_ab() {
  local rounds=$1 round build exe
  for round in $(seq "$rounds"); do
    for build in old new; do
      exe="$DIST/infer_kernels_test"
      [ "$build" = old ] && exe="$DIST/old/infer_kernels_test"
      echo "== prefill-step kernels $build, round $round"
      "$exe" --prefill-step-bench | grep -E "rope_store_kv|rmsnorm|silu_mul|sum per layer"
    done
  done
}

# ab_begin NAME: for an interleaved A/B script, $log ($OUT/NAME.txt, opened with write_env's header)
# and $runs (a temporary folder for each run's result file). ab_end NAME: the result files as
# $OUT/NAME.tar.gz, then the log on stdout (lines cut at 300 characters).
ab_begin() {
  OUT=${OUT:-$PWD/out}
  mkdir -p "$OUT"
  log="$OUT/$1.txt"
  runs=$(mktemp -d)
  write_env "$log"
}
ab_end() {
  tar czf "$OUT/$1.tar.gz" -C "$runs" .
  cut -c1-300 "$log"
}

# serve_ab_run LABEL JSON ONLY [ENV=VALUE ...] -- [FLAG ...]: one `gpuscout bench --only ONLY --model
# llama-3.1-8b` run under the environment assignments, with the flags, its result file JSON, its
# serve/copy, decode, prefill and static report lines under "== LABEL" and its exit status after them.
# The machine tag is the card that ran (nvidia-smi's name, lower case with dashes).
serve_ab_run() {
  local label=$1 json=$2 only=$3
  shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift
  echo "== $label"
  local card
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z ' 'a-z-')
  env "${envs[@]}" "$bin" -v bench --only "$only" --model llama-3.1-8b "$@" --out "$json" \
    --tags "machine:${card:-unknown},script:$(basename "$0" .sh)" 2>&1 | grep -E "^\[gpu0\] serve/(copy|decode|prefill|static)"
  echo "== exit ${PIPESTATUS[0]}"
}

# serve_ab_switch VAR ONLY PREFIX: ROUNDS (default 3) interleaved rounds of serve_ab_run with the
# environment switch VAR=0, then VAR=1, over `--only ONLY`; result files $runs/PREFIX<0|1>-<round>.json.
serve_ab_switch() {
  local var=$1 only=$2 prefix=$3 round value
  for round in $(seq "${ROUNDS:-3}"); do
    for value in 0 1; do
      serve_ab_run "$var=$value, round $round" "$runs/$prefix$value-$round.json" "$only" "$var=$value" --
    done
  done
}

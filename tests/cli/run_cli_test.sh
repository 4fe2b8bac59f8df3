#!/usr/bin/env bash
# Usage: run_cli_test.sh GPUSCOUT EXPECTED_EXIT [CHECK...] -- ARGS...
# Checks (any number, in any order):
#   --stdout-contains TEXT   --stderr-contains TEXT   --stdout-lacks TEXT   --stderr-lacks TEXT
#   --stdout-empty           --stderr-empty           --stdout-json (stdout parses as JSON)
#   --stdout-golden FILE     (stdout equals FILE after numbers become <N> and space/dash runs collapse)
#   --env NAME=VALUE         (set in the command's environment)
set -u
bin=$1
expected=$2
shift 2
checks=()
envs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --stdout-empty | --stderr-empty | --stdout-json) checks+=("$1" "") ; shift ;;
    --env) envs+=("$2"); shift 2 ;;
    *) checks+=("$1" "$2"); shift 2 ;;
  esac
done
[ "${1:-}" = "--" ] && shift
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
env "${envs[@]}" "$bin" "$@" >"$out" 2>"$err"
code=$?
fail=0
report() { echo "FAIL: $*"; fail=1; }
[ "$code" = "$expected" ] || report "exit code $code, expected $expected"
i=0
while [ $i -lt ${#checks[@]} ]; do
  check=${checks[$i]}
  arg=${checks[$((i + 1))]}
  i=$((i + 2))
  case "$check" in
    --stdout-contains) grep -qiF -- "$arg" "$out" || report "stdout lacks '$arg'" ;;
    --stderr-contains) grep -qiF -- "$arg" "$err" || report "stderr lacks '$arg'" ;;
    --stdout-lacks) grep -qiF -- "$arg" "$out" && report "stdout contains '$arg'" ;;
    --stderr-lacks) grep -qiF -- "$arg" "$err" && report "stderr contains '$arg'" ;;
    --stdout-empty) [ -s "$out" ] && report "stdout is not empty" ;;
    --stderr-empty) [ -s "$err" ] && report "stderr is not empty" ;;
    --stdout-json) python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out" 2>/dev/null || report "stdout is not valid JSON" ;;
    --stdout-golden)
      # Commit hashes (12 or 40 hex digits) become <COMMIT> and numbers <N>; runs of spaces and of
      # dashes collapse, so a number of another width (which moves the column padding of text tables)
      # or a regenerated calibration table's commit does not break the golden file.
      mask='s/\b([0-9a-f]{40}|[0-9a-f]{12})\b/<COMMIT>/g; s/[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/<N>/g; s/ +/ /g; s/-{2,}/--/g'
      if ! diff -u <(sed -E "$mask" "$arg") <(sed -E "$mask" "$out") >/dev/null; then
        report "stdout differs from golden $arg:"
        diff -u <(sed -E "$mask" "$arg") <(sed -E "$mask" "$out") | head -40
      fi
      ;;
    *) report "unknown check $check" ;;
  esac
done
if [ $fail -ne 0 ]; then
  echo "--- command: $bin $*"
  echo "--- stdout:"; head -50 "$out"
  echo "--- stderr:"; head -50 "$err"
  exit 1
fi
exit 0

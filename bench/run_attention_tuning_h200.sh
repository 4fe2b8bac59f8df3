#!/usr/bin/env bash
# Decode attention plans timed at engine start-up (CudaEngine::Impl::tune_attention), A/B on one
# H200 in one call: the decode attention kernel checks, the engine checks (tiny model, TP1, the
# tuned plans in its graphs), then the engine's timing mode for Llama-3.1-8B and Qwen2.5-7B in each
# of MODES (default "fixed tuned"; fixed: --no-attention-tuning, the kernels' own choice by pair
# count; tuned: the engine's tuning; alone: GPUSCOUT_ATTENTION_TUNE=alone, where that build has it;
# plan:P: every decode graph on plan P, --attention-plan split|streaming:BLOCKS),
# interleaved ROUNDS times; each tuned run prints the plan it kept per batch bucket and context class.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_attention_tuning_h200.sh
# DIST holds gpuscout (scripts/make-device-dist.sh) plus infer_kernels_test and infer_engine_test.
# Writes $OUT/attention-tuning.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/attention-tuning.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" --decode-only | grep -E "FAIL|PASSED"
  echo "== decode attention checks: exit ${PIPESTATUS[0]}"
  "$DIST/infer_engine_test" | tail -6
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-2}"); do
    for model in llama-3.1-8b qwen2.5-7b; do
      for mode in ${MODES:-fixed tuned}; do
        echo "== engine timing $model $mode, round $round"
        case $mode in
          fixed) "$DIST/infer_engine_test" --bench "$model" --no-attention-tuning ;;
          alone) GPUSCOUT_ATTENTION_TUNE=alone "$DIST/infer_engine_test" --bench "$model" ;;
          plan:*) "$DIST/infer_engine_test" --bench "$model" --attention-plan "${mode#plan:}" ;;
          *) "$DIST/infer_engine_test" --bench "$model" ;;
        esac | grep -E "start-up|attention batch|decode batch"
      done
    done
  done
} >"$log" 2>&1
grep -E "^==|PASSED|FAIL|start-up|decode batch|attention batch (1|8|32) context <= 2048" "$log"

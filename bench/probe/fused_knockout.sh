# Session-8 experiment: the fused batch-1 kernel's step time with parts knocked out (timing only),
# against the unfused path, ROUNDS interleaved rounds; KOS lists the knock-outs ("none" = full).
source bench/dist_env.sh
for round in $(seq "${ROUNDS:-2}"); do
  for ko in ${KOS:-none attention norms silu barriers attention,norms,silu attention,norms,silu,barriers}; do
    if [ "$ko" = none ]; then args=""; else args="--knock-out $ko"; fi
    echo "== fused knock-out $ko round $round"
    .devdist/infer_engine_test --bench llama-3.1-8b $args | grep -E "decode batch   1"
  done
  echo "== unfused round $round"
  .devdist/infer_engine_test --bench llama-3.1-8b --no-fused-decode | grep -E "decode batch   1"
done

# gpuscout plan: what fits where (serve and train), golden files in every format (numbers masked),
# stream separation, and impossible requests as usage errors naming the flag.
foreach(pair IN ITEMS "table;txt" "csv;csv" "md;md" "json;json")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  gpuscout_cli_test(plan_serve_one_gpu_${format} 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/plan_serve_h100.${ext}
                    --stderr-empty -- --format ${format} plan --model llama-3.1-70b --task serve --gpu h100)
endforeach()
gpuscout_cli_test(plan_serve_all_gpus 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/plan_serve_all.txt --stderr-empty
                  -- plan --model llama-3.1-8b --task serve --context 32768 --batch 8)
gpuscout_cli_test(plan_train_one_gpu 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/plan_train_h100.txt --stderr-empty
                  -- plan --model llama-3.1-70b --task train --gpu h100 --zero 3 --recompute full)
gpuscout_cli_test(plan_train_json_parses 0 --stdout-json --stdout-contains "\"optimizer\"" --stdout-contains "\"total_gib\""
                  --stderr-empty -- plan --model llama-2-7b --task train --gpu h200 --format json)

# Figures that must come out of the model.
gpuscout_cli_test(plan_serve_70b_needs_two_h100 0 --stdout-contains "TP1: needs 134.2 GiB per GPU > 72.0 GiB usable"
                  --stderr-empty -- plan --model llama-3.1-70b --task serve --gpu h100 --format md)
gpuscout_cli_test(plan_serve_int4_fits_one_h100 0 --stdout-contains "(4 bits + 20 scale bits / group of 128)"
                  --stdout-contains "| H100-SXM5-80GB | 80.0 | yes | 1 |" --stderr-empty
                  -- plan --model llama-3.1-70b --task serve --gpu h100 --precision int4 --format md)
gpuscout_cli_test(plan_serve_kv_512kib 0 --stdout-contains "x 524288 B/token" --stderr-empty
                  -- plan --model llama-2-7b --task serve --gpu h100 --context 1000)
gpuscout_cli_test(plan_serve_mla_kv 0 --stdout-contains "MLA latent 512 + RoPE key 64" --stderr-empty
                  -- plan --model deepseek-v3 --task serve --gpu h200 --precision fp8)
gpuscout_cli_test(plan_train_fixed_layout 0 --stdout-contains "TP2 x PP2" --stdout-contains "first stage"
                  --stderr-empty -- plan --model llama-2-7b --task train --gpu h100 --tp 2 --pp 2)
gpuscout_cli_test(plan_train_qlora 0 --stdout-contains "NF4" --stdout-contains "LoRA adapters" --stderr-empty
                  -- plan --model llama-2-70b --task train --gpu l40s --finetune qlora --seq 1024 --lora-rank 64)

# Impossible requests: exit 2 and the flag named on stderr, nothing on stdout.
gpuscout_cli_test(plan_tp_not_dividing_heads 2 --stdout-empty --stderr-contains "--tp 3" --stderr-contains "32 heads"
                  -- plan --model llama-2-7b --task serve --tp 3)
gpuscout_cli_test(plan_pp_over_layers 2 --stdout-empty --stderr-contains "--pp 64"
                  -- plan --model llama-2-7b --task serve --pp 64)
gpuscout_cli_test(plan_ep_without_experts 2 --stdout-empty --stderr-contains "--ep 2" --stderr-contains "no experts"
                  -- plan --model llama-2-7b --task serve --ep 2)
gpuscout_cli_test(plan_negative_context 2 --stdout-empty --stderr-contains "--context" -- plan --model llama-2-7b
                  --task serve --context -5)
gpuscout_cli_test(plan_zero_batch 2 --stdout-empty --stderr-contains "--batch" -- plan --model llama-2-7b --task serve
                  --batch 0)
gpuscout_cli_test(plan_bad_task 2 --stdout-empty --stderr-contains "--task" -- plan --model llama-2-7b --task infer)
gpuscout_cli_test(plan_missing_model 2 --stdout-empty --stderr-contains "--model" -- plan --task serve)
gpuscout_cli_test(plan_unknown_model 2 --stdout-empty --stderr-contains "unknown model" --stderr-contains "did you mean"
                  -- plan --model llama-9-7b --task serve)
gpuscout_cli_test(plan_unknown_gpu 2 --stdout-empty --stderr-contains "unknown GPU 'h101'" -- plan --model llama-2-7b
                  --task serve --gpu h101)
gpuscout_cli_test(plan_bad_precision 2 --stdout-empty --stderr-contains "--precision" -- plan --model llama-2-7b
                  --task serve --precision int3)
gpuscout_cli_test(plan_train_int4_is_usage_error 2 --stdout-empty --stderr-contains "--precision" -- plan --model
                  llama-2-7b --task train --precision int4)
gpuscout_cli_test(plan_bad_zero 2 --stdout-empty --stderr-contains "--zero" -- plan --model llama-2-7b --task train
                  --zero 4)
gpuscout_cli_test(plan_bad_recompute 2 --stdout-empty --stderr-contains "--recompute" -- plan --model llama-2-7b
                  --task train --recompute some)
gpuscout_cli_test(plan_train_flag_for_serve 2 --stdout-empty --stderr-contains "--zero applies to --task train"
                  -- plan --model llama-2-7b --task serve --zero 3)
gpuscout_cli_test(plan_serve_flag_for_train 2 --stdout-empty --stderr-contains "--context applies to --task serve"
                  -- plan --model llama-2-7b --task train --context 8192)
gpuscout_cli_test(plan_no_fit_gives_the_numbers 0 --stdout-contains "| no |" --stdout-contains "GiB per GPU >"
                  --stdout-contains "largest: weights_linear" --stderr-empty
                  -- plan --model llama-3.1-405b --task serve --gpu l40s --max-gpus 8 --format md)
# A switch (add_flag) of the other task is refused too, like the options above.
gpuscout_cli_test(plan_train_switch_with_serve 2 --stdout-empty --stderr-contains "--distributed-optimizer applies to --task train"
                  -- plan --model llama-2-7b --task serve --distributed-optimizer)

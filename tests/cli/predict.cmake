# gpuscout predict infer|train: golden output (numbers masked), JSON that parses and names units,
# calibration source and error band, and impossible requests as usage errors naming the flag.
gpuscout_cli_test(predict_infer_h200_golden 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/predict_infer_h200.txt
                  --stderr-empty -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --precision bf16
                  --isl 1024 --osl 256 --batch 32)
gpuscout_cli_test(predict_train_h100_golden 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/predict_train_h100.txt
                  --stderr-empty -- predict train --model llama-2-7b --gpu h100 --gpus 16 --tp 2 --pp 2
                  --global-batch 64 --seq 4096 --precision bf16 --train-tokens 1e12)
gpuscout_cli_test(predict_infer_json 0 --stdout-json --stdout-contains "\"unit\": \"ms\""
                  --stdout-contains "\"tier\"" --stdout-contains "error_band_pct" --stdout-contains "transferred from H200"
                  --stderr-empty -- --format json predict infer --model llama-2-70b --gpu h100 --gpus 2 --tp 2
                  --precision fp8 --isl 2048 --osl 2048 --batch 32)
gpuscout_cli_test(predict_infer_public_tier 0 --stdout-contains "public anchors" --stderr-empty
                  -- predict infer --model llama-2-7b --gpu a100-sxm4-80gb --gpus 1 --precision fp16 --isl 128 --osl 128)
gpuscout_cli_test(predict_infer_server 0 --stdout-contains "largest batch within the bounds" --stderr-empty
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 1000 --osl 200 --mode server
                  --ttft-ms 500 --tpot-ms 30 --framework vllm)
gpuscout_cli_test(predict_infer_offline 0 --stdout-contains "KV-capacity batch" --stderr-empty
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 1000 --osl 200 --mode offline)
gpuscout_cli_test(predict_train_mfu_names_peak 0 --stdout-contains "dense BF16 peak of H100-SXM5-80GB"
                  --stderr-empty -- predict train --model llama-2-7b --gpu h100 --gpus 8 --global-batch 64 --seq 4096)
gpuscout_cli_test(predict_train_fp8_peak 0 --stdout-contains "dense FP8 peak" --stderr-empty
                  -- predict train --model llama-2-7b --gpu h100 --gpus 8 --global-batch 64 --seq 4096 --precision fp8)

# Impossible requests: exit 2 and the flag named on stderr.
gpuscout_cli_test(predict_bad_tp 2 --stderr-contains "--tp" --stdout-empty
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 3 --tp 3 --isl 128 --osl 128)
gpuscout_cli_test(predict_bad_gpus_split 2 --stderr-contains "--gpus" --stdout-empty
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 3 --tp 2 --isl 128 --osl 128)
gpuscout_cli_test(predict_no_fp8_on_a100 2 --stderr-contains "--precision" --stdout-empty
                  -- predict infer --model llama-3.1-8b --gpu a100-sxm4-80gb --gpus 1 --precision fp8 --isl 128 --osl 128)
gpuscout_cli_test(predict_too_few_gpus 2 --stderr-contains "--gpus" --stdout-empty
                  -- predict infer --model llama-3.1-405b --gpu h100 --gpus 1 --isl 128 --osl 128)
gpuscout_cli_test(predict_batch_too_big 2 --stderr-contains "--batch" --stdout-empty
                  -- predict infer --model llama-3.1-8b --gpu l4 --gpus 1 --isl 4096 --osl 4096 --batch 512)
gpuscout_cli_test(predict_server_needs_bound 2 --stderr-contains "--mode" --stdout-empty
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --mode server)
gpuscout_cli_test(predict_negative_isl 2 --stderr-contains "--isl" --stdout-empty
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl -5 --osl 128)
gpuscout_cli_test(predict_unknown_gpu 2 --stderr-contains "gpu" --stdout-empty
                  -- predict infer --model llama-3.1-8b --gpu z9000 --gpus 1 --isl 128 --osl 128)
gpuscout_cli_test(predict_unknown_framework 2 --stderr-contains "--framework" --stdout-empty
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --framework foo)
gpuscout_cli_test(predict_train_bad_global_batch 2 --stderr-contains "--global-batch" --stdout-empty
                  -- predict train --model llama-2-7b --gpu h100 --gpus 8 --global-batch 12 --seq 4096)
gpuscout_cli_test(predict_train_bad_zero 2 --stderr-contains "--zero" --stdout-empty
                  -- predict train --model llama-2-7b --gpu h100 --gpus 8 --global-batch 64 --seq 4096 --zero 5)
gpuscout_cli_test(predict_train_int4 2 --stderr-contains "--precision" --stdout-empty
                  -- predict train --model llama-2-7b --gpu h100 --gpus 8 --global-batch 64 --seq 4096 --precision int4)

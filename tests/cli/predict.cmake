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

# --cost: the TCO model prices the prediction (issue #5: USD per M input/output tokens, per training run).
gpuscout_cli_test(predict_infer_cost_json 0 --stdout-json --stdout-contains "\"input_usd_per_mtok\""
                  --stdout-contains "\"output_usd_per_mtok\"" --stdout-contains "\"usd_per_gpu_hr\""
                  --stdout-contains "\"total_usd_per_mtok\"" --stdout-contains "on-demand" --stderr-empty
                  -- --format json predict infer --model llama-3.1-8b --gpu h100 --gpus 1 --isl 1024 --osl 256
                  --batch 32 --cost)
gpuscout_cli_test(predict_infer_cost_set 0 --stdout-contains "Cost per million tokens" --stdout-contains "3 years"
                  --stderr-empty -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 1024 --osl 256
                  --mode offline --cost --years 3 --set utilization=1)
gpuscout_cli_test(predict_train_cost 0 --stdout-contains "usd_per_run" --stdout-contains "gpu_hours" --stderr-empty
                  -- --format csv predict train --model llama-2-7b --gpu h100 --gpus 8 --global-batch 64 --seq 4096
                  --tokens 1e10 --cost)
gpuscout_cli_test(predict_train_cost_needs_tokens 2 --stdout-empty --stderr-contains "--train-tokens"
                  -- predict train --model llama-2-7b --gpu h100 --gpus 8 --global-batch 64 --seq 4096 --cost)
gpuscout_cli_test(predict_set_needs_cost 2 --stdout-empty --stderr-contains "--set"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --set pue=1.2)
gpuscout_cli_test(predict_cost_bad_set 2 --stdout-empty --stderr-contains "unknown TCO parameter"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --cost --set pue2=1)

# Server mode: the queueing simulation (scheduler + load generator on the speed model).
gpuscout_cli_test(predict_infer_server_queueing 0 --stdout-contains "ttft_p99" --stdout-contains "tpot_p50"
                  --stdout-contains "peak_rate" --stdout-contains "ttft_p99_ms" --stderr-empty
                  -- --format csv predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 512 --osl 128
                  --mode server --ttft-ms 1000 --tpot-ms 50 --rate 20 --sim-duration-s 5)
gpuscout_cli_test(predict_concurrency 0 --stdout-contains "concurrency_tpot_p99" --stdout-contains "with 16 requests in flight"
                  -- --format csv predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 512 --osl 128
                  --mode server --ttft-ms 1000 --tpot-ms 50 --concurrency 16 --sim-duration-s 5)
gpuscout_cli_test(predict_concurrency_range_ratio 0 --stdout-contains "concurrency_output_throughput"
                  -- --format csv predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 512 --osl 128
                  --mode server --ttft-ms 1000 --tpot-ms 50 --concurrency 16 --range-ratio 0.5 --sim-duration-s 5)
gpuscout_cli_test(predict_range_ratio_bad 2 --stdout-empty --stderr-contains "--range-ratio must be in"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --mode server
                  --ttft-ms 500 --range-ratio 1.5)
gpuscout_cli_test(predict_concurrency_needs_server 2 --stdout-empty --stderr-contains "--concurrency: only with --mode server"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --concurrency 4)
gpuscout_cli_test(predict_concurrency_zero 2 --stdout-empty --stderr-contains "--concurrency: must be at least 1"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --mode server
                  --ttft-ms 500 --concurrency 0)
gpuscout_cli_test(predict_rate_needs_server 2 --stdout-empty --stderr-contains "--rate"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --rate 5)
gpuscout_cli_test(predict_bad_rate 2 --stdout-empty --stderr-contains "--rate"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --mode server
                  --ttft-ms 500 --rate -1)
gpuscout_cli_test(predict_bad_max_running 2 --stdout-empty --stderr-contains "--max-running"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 1 --isl 128 --osl 128 --mode server
                  --ttft-ms 500 --max-running 0)

# Expert parallelism: --ep for MoE models, refused for dense ones.
gpuscout_cli_test(predict_train_ep 0 --stdout-contains "ep_comm_per_micro_batch" --stdout-contains "EP 8"
                  --stderr-empty -- predict train --model mixtral-8x7b --gpu h100 --gpus 16 --tp 2 --ep 8
                  --global-batch 64 --seq 4096)
gpuscout_cli_test(predict_infer_ep 0 --stdout-contains "EP 8" --stderr-empty
                  -- predict infer --model deepseek-v3 --gpu h200 --gpus 8 --tp 8 --ep 8 --precision fp8
                  --isl 1024 --osl 256 --batch 8)
gpuscout_cli_test(predict_ep_dense 2 --stdout-empty --stderr-contains "--ep"
                  -- predict infer --model llama-3.1-8b --gpu h200 --gpus 2 --ep 2 --isl 128 --osl 128)

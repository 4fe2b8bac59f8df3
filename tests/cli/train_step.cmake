# gpuscout bench --only train-step: bad flags are usage errors (exit 2) naming the flag, before
# anything looks for a GPU, so these pass on machines without one and in builds without CUDA.
gpuscout_cli_test(bench_train_unknown_model 2 --stdout-empty --stderr-contains "llama-9z" --stderr-contains "did you mean"
                  -- bench --only train-step --model llama-9z)
gpuscout_cli_test(bench_train_unsupported_model 2 --stdout-empty --stderr-contains "mixture-of-experts"
                  -- bench --only train-step --model mixtral-8x7b)
gpuscout_cli_test(bench_train_qkv_bias_model 2 --stdout-empty --stderr-contains "does not implement QKV biases"
                  -- bench --only train-step --model qwen2.5-7b)
gpuscout_cli_test(bench_train_layers_zero 2 --stdout-empty --stderr-contains "--train-layers 0"
                  -- bench --only train-step --train-layers 0)
gpuscout_cli_test(bench_train_layers_beyond_model 2 --stdout-empty --stderr-contains "--train-layers 33"
                  --stderr-contains "32 decoder layers" -- bench --only train-step --train-layers 33)
gpuscout_cli_test(bench_train_bad_micro_batch 2 --stdout-empty --stderr-contains "--micro-batch: 'x'"
                  -- bench --only train-step --micro-batch 1,x)
gpuscout_cli_test(bench_train_micro_batch_zero 2 --stdout-empty --stderr-contains "--micro-batch: '0'"
                  -- bench --only train-step --micro-batch 0)
gpuscout_cli_test(bench_train_seq_beyond_context 2 --stdout-empty --stderr-contains "--seq 200000"
                  --stderr-contains "context" -- bench --only train-step --seq 2048,200000)
gpuscout_cli_test(bench_train_flag_without_train_step 2 --stdout-empty --stderr-contains "--only train-step"
                  -- bench --only memory --seq 4096)
gpuscout_cli_test(bench_train_model_without_either 2 --stdout-empty --stderr-contains "--only train-step"
                  -- bench --only gemm --model llama-3.1-8b)
gpuscout_cli_test(bench_train_bad_precision 2 --stdout-empty --stderr-contains "--train-precision fp16"
                  --stderr-contains "bf16 or fp8" -- bench --only train-step --train-precision fp16)
gpuscout_cli_test(bench_train_precision_without_train_step 2 --stdout-empty --stderr-contains "--train-precision"
                  --stderr-contains "--only train-step" -- bench --only gemm --train-precision fp8)

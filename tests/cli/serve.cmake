# gpuscout bench --only serve: bad flags are usage errors (exit 2) before anything looks for a GPU,
# so these pass on machines without one and in builds without CUDA.
gpuscout_cli_test(bench_serve_unknown_model 2 --stdout-empty --stderr-contains "llama-9z" --stderr-contains "did you mean"
                  -- bench --only serve --model llama-9z)
gpuscout_cli_test(bench_serve_unsupported_model 2 --stdout-empty --stderr-contains "mixture-of-experts"
                  -- bench --only serve --model mixtral-8x7b)
gpuscout_cli_test(bench_serve_tp_not_dividing 2 --stdout-empty --stderr-contains "--tp 3"
                  -- bench --only serve --tp 3)
gpuscout_cli_test(bench_serve_rate_zero 2 --stdout-empty --stderr-contains "--rate must be a positive"
                  -- bench --only serve --scenario server --rate 0)
gpuscout_cli_test(bench_serve_rate_negative 2 --stdout-empty --stderr-contains "--rate must be a positive"
                  -- bench --only serve --rate=-2)
gpuscout_cli_test(bench_serve_osl_zero 2 --stdout-empty --stderr-contains "--osl must be a whole number >= 1"
                  -- bench --only serve --osl 0)
gpuscout_cli_test(bench_serve_bad_scenario 2 --stdout-empty --stderr-contains "--scenario"
                  -- bench --only serve --scenario bursty)
gpuscout_cli_test(bench_serve_lengths_missing 2 --stdout-empty --stderr-contains "--lengths: no file"
                  -- bench --only serve --scenario offline --lengths /nonexistent/lengths.csv)
gpuscout_cli_test(bench_serve_flag_without_serve 2 --stdout-empty --stderr-contains "--only serve"
                  -- bench --only memory --model llama-3.1-8b)
gpuscout_cli_test(bench_serve_find_peak_needs_bound 2 --stdout-empty --stderr-contains "--ttft-ms"
                  -- bench --only serve --find-peak)
gpuscout_cli_test(bench_serve_find_peak_not_offline 2 --stdout-empty --stderr-contains "--find-peak"
                  -- bench --only serve --find-peak --scenario offline --ttft-ms 500)
gpuscout_cli_test(bench_serve_rate_list_bad_item 2 --stdout-empty --stderr-contains "--rate must be a positive number of requests/s, got 'x'"
                  -- bench --only serve --rate 5,x)
gpuscout_cli_test(bench_serve_find_peak_one_rate 2 --stdout-empty --stderr-contains "--find-peak takes one --rate"
                  -- bench --only serve --find-peak --ttft-ms 500 --rate 5,10)
gpuscout_cli_test(bench_serve_concurrency_zero 2 --stdout-empty --stderr-contains "--concurrency: '0' is not a whole number >= 1"
                  -- bench --only serve --concurrency 8,0)
gpuscout_cli_test(bench_serve_concurrency_and_rate 2 --stdout-empty --stderr-contains "one load scenario per run"
                  -- bench --only serve --rate 5 --concurrency 4)
gpuscout_cli_test(bench_serve_concurrency_needs_count 2 --stdout-empty --stderr-contains "--scenario concurrency needs --concurrency"
                  -- bench --only serve --scenario concurrency)
gpuscout_cli_test(bench_serve_concurrency_not_offline 2 --stdout-empty --stderr-contains "does not apply to --scenario offline"
                  -- bench --only serve --scenario offline --concurrency 4)
gpuscout_cli_test(bench_serve_range_ratio_one 2 --stdout-empty --stderr-contains "--range-ratio must be in"
                  -- bench --only serve --concurrency 8 --range-ratio 1)
gpuscout_cli_test(bench_serve_range_ratio_with_file 2 --stdout-empty --stderr-contains "--range-ratio: spreads --isl/--osl"
                  -- bench --only serve --concurrency 8 --range-ratio 0.5 --lengths ${CMAKE_CURRENT_LIST_FILE})
gpuscout_cli_test(bench_serve_range_ratio_needs_scenario 2 --stdout-empty --stderr-contains "--range-ratio: applies to the load scenario"
                  -- bench --only serve --range-ratio 0.5)
gpuscout_cli_test(bench_serve_static_repeats_zero 2 --stdout-empty
                  --stderr-contains "--static-repeats: expected a whole number >= 1" -- bench --only serve --static-repeats 0)
gpuscout_cli_test(bench_serve_server_needs_rate 2 --stdout-empty --stderr-contains "--rate"
                  -- bench --only serve --scenario server)
gpuscout_cli_test(bench_serve_beyond_context 2 --stdout-empty --stderr-contains "context"
                  -- bench --only serve --isl 200000)
gpuscout_cli_test(bench_serve_bad_batch_list 2 --stdout-empty --stderr-contains "--serve-batch: 'x'"
                  -- bench --only serve --serve-batch 1,x)
gpuscout_cli_test(bench_serve_load_flag_needs_scenario 2 --stdout-empty --stderr-contains "--scenario"
                  -- bench --only serve --requests 10)
gpuscout_cli_test(bench_serve_bad_engine_tuning 2 --stdout-empty --stderr-contains "--engine-tuning: expected steps or alone"
                  -- bench --only serve --engine-tuning fast)
gpuscout_cli_test(bench_serve_bad_stepping 2 --stdout-empty --stderr-contains "--stepping: expected pipelined or synchronous"
                  -- bench --only serve --stepping async)
gpuscout_cli_test(bench_serve_step_budget_zero 2 --stdout-empty --stderr-contains "--max-step-tokens must be a whole number >= 1"
                  -- bench --only serve --max-step-tokens 0)
gpuscout_cli_test(bench_serve_step_budget_below_batch 2 --stdout-empty
                  --stderr-contains "--max-step-tokens 16 is below the largest --serve-batch 32"
                  -- bench --only serve --max-step-tokens 16)

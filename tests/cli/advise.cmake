# gpuscout advise: the embedded scenarios, a workload file, flag equivalents, golden output (numbers
# masked), the result file read back by report --advice, the history, and bad input as exit 1 (a bad
# file, named with its field) or 2 (a bad flag or name).
set(GPUSCOUT_WORKLOAD_TEST_DATA ${CMAKE_CURRENT_SOURCE_DIR}/../data/workloads)

gpuscout_cli_test(advise_list 0 --stdout-contains "chat-70b-slo" --stdout-contains "pretrain-70b"
                  --stdout-contains "multi-tenant-8b" --stdout-contains "mixed-tiers-8b"
                  --stdout-contains "finetune-8b-quick" --stdout-contains "batch-70b-offline" --stderr-empty
                  -- advise --list)
gpuscout_cli_test(advise_file_golden 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/advise_small_serve.txt --stderr-empty
                  -- --no-history advise ${GPUSCOUT_WORKLOAD_TEST_DATA}/small-serve.toml)
gpuscout_cli_test(advise_file_md 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/advise_small_serve.md --stderr-empty
                  -- --no-history --format md advise ${GPUSCOUT_WORKLOAD_TEST_DATA}/small-serve.toml)
gpuscout_cli_test(advise_json 0 --stdout-json --stdout-contains "\"options\"" --stdout-contains "\"rejected\""
                  --stderr-empty -- --no-history --format json advise --workload chat-70b-slo)
gpuscout_cli_test(advise_chat_says_what_is_measured 0 --stdout-contains "measured" --stdout-contains "transferred"
                  --stdout-contains "H200-SXM-141GB" --stdout-contains "Why, in numbers" --stderr-empty
                  -- --no-history advise --workload chat-70b-slo)
gpuscout_cli_test(advise_train 0 --stdout-contains "USD/run" --stdout-contains "MFU" --stderr-empty
                  -- --no-history advise --workload finetune-8b-quick --top 3)
gpuscout_cli_test(advise_tiers 0 --stdout-contains "tier interactive" --stdout-contains "tier batch" --stderr-empty
                  -- --no-history advise --workload mixed-tiers-8b --top 2)
gpuscout_cli_test(advise_from_flags 0 --stdout-contains "H100-SXM5-80GB" --stdout-contains "USD/Mtok" --stderr-empty
                  -- --no-history advise --task serve --model llama-3.1-8b --isl 512 --osl 128 --requests-per-s 1
                  --gpus h100 --precisions bf16,fp8)
gpuscout_cli_test(advise_flag_override_budget 0 --stdout-contains "No option meets every bound"
                  --stdout-contains "budget" --stderr-empty
                  -- --no-history advise ${GPUSCOUT_WORKLOAD_TEST_DATA}/small-serve.toml --budget-usd 1)
gpuscout_cli_test(advise_fp8_on_a100_rejected 0 --stdout-contains "A100-SXM4-80GB has no FP8 dense peak" --stderr-empty
                  -- --no-history advise --task serve --model llama-3.1-8b --isl 512 --osl 128 --requests-per-s 1
                  --gpus a100,h100 --precisions fp8)

gpuscout_cli_test(advise_missing_field 1 --stdout-empty --stderr-contains "missing-osl.toml" --stderr-contains "osl"
                  -- --no-history advise ${GPUSCOUT_WORKLOAD_TEST_DATA}/missing-osl.toml)
gpuscout_cli_test(advise_unknown_key 1 --stdout-empty --stderr-contains "unknown-key.toml"
                  --stderr-contains "deadline_hours" -- --no-history advise ${GPUSCOUT_WORKLOAD_TEST_DATA}/unknown-key.toml)
gpuscout_cli_test(advise_missing_file 1 --stdout-empty --stderr-contains "no-such.toml"
                  -- --no-history advise ${GPUSCOUT_WORKLOAD_TEST_DATA}/no-such.toml)
gpuscout_cli_test(advise_unknown_workload 2 --stdout-empty --stderr-contains "unknown workload 'chat-70b'"
                  --stderr-contains "chat-70b-slo" -- --no-history advise --workload chat-70b)
gpuscout_cli_test(advise_nothing_given 2 --stdout-empty --stderr-contains "--workload" -- --no-history advise)
gpuscout_cli_test(advise_two_sources 2 --stdout-empty --stderr-contains "only one"
                  -- --no-history advise ${GPUSCOUT_WORKLOAD_TEST_DATA}/small-serve.toml --workload chat-70b-slo)
gpuscout_cli_test(advise_negative_ttft 2 --stdout-empty --stderr-contains "--ttft-ms"
                  -- --no-history advise --workload chat-70b-slo --ttft-ms -1)
gpuscout_cli_test(advise_zero_top 2 --stdout-empty --stderr-contains "--top" -- --no-history advise --workload chat-70b-slo
                  --top 0)
gpuscout_cli_test(advise_unknown_gpu 2 --stdout-empty --stderr-contains "unknown GPU 'h101'"
                  -- --no-history advise --workload chat-70b-slo --gpus h101)
gpuscout_cli_test(advise_bad_precision 2 --stdout-empty --stderr-contains "--precisions"
                  -- --no-history advise --workload chat-70b-slo --precisions fp7)
gpuscout_cli_test(advise_train_flag_on_serve 2 --stdout-empty --stderr-contains "--deadline-days"
                  -- --no-history advise --workload chat-70b-slo --deadline-days 3)
gpuscout_cli_test(advise_bad_utilization 2 --stdout-empty --stderr-contains "--utilization"
                  -- --no-history advise --workload chat-70b-slo --utilization 2)
gpuscout_cli_test(report_advice_wrong_kind 2 --stdout-empty --stderr-contains "--advice"
                  -- report --advice ${CMAKE_CURRENT_SOURCE_DIR}/../data/results/fixture-run-a.json -o -)

# advise --out FILE, then report --advice FILE; the run lands in the history given by --db.
add_test(NAME cli.advise_out_report_history
         COMMAND ${CMAKE_COMMAND} -DGPUSCOUT=$<TARGET_FILE:gpuscout>
                 -DWORKLOAD=${GPUSCOUT_WORKLOAD_TEST_DATA}/small-serve.toml
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/advise-test -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/advise_report.cmake)
set_tests_properties(cli.advise_out_report_history PROPERTIES LABELS cli)

# plan checks precision support too (issue #5): FP8 on an A100 is a usage error; over all GPUs it is a note.
gpuscout_cli_test(plan_fp8_on_a100 2 --stdout-empty --stderr-contains "--precision"
                  --stderr-contains "A100-SXM4-80GB has no FP8 dense peak"
                  -- plan --model llama-3.1-8b --task serve --gpu a100 --precision fp8)
gpuscout_cli_test(plan_fp8_all_gpus_note 0 --stdout-contains "Not listed: no fp8 dense peak"
                  --stdout-contains "A100-SXM4-80GB" -- plan --model llama-3.1-8b --task serve --precision fp8)
gpuscout_cli_test(plan_fp8_all_gpus_no_row 0 --stdout-contains "H100-SXM5-80GB," --stdout-lacks "A100-SXM4-80GB,"
                  -- plan --model llama-3.1-8b --task serve --precision fp8 --format csv)

# The README's main job (scripts/main-job.sh): advice and report from the embedded data (bench --quick
# first where a GPU is present), history in the build tree.
add_test(NAME cli.main_job_advise_report
         COMMAND ${CMAKE_COMMAND} -E env GPUSCOUT=$<TARGET_FILE:gpuscout>
                 GPUSCOUT_HISTORY_DB=${CMAKE_CURRENT_BINARY_DIR}/main-job-test/history.db
                 bash ${PROJECT_SOURCE_DIR}/scripts/main-job.sh ${CMAKE_CURRENT_BINARY_DIR}/main-job-test)
set_tests_properties(cli.main_job_advise_report PROPERTIES LABELS cli
                     PASS_REGULAR_EXPRESSION "Ranked options: chat-70b-slo.*Where the figures come from.*gpuscout report: wrote")
# MoE training: the advisor tries expert parallelism and micro-batches above 1, and says which it chose.
gpuscout_cli_test(advise_moe_train_ep 0 --stdout-contains " EP" --stdout-contains "micro-batch" --stderr-empty
                  -- --no-history advise --task train --model mixtral-8x7b --train-tokens 1e10 --global-batch 256
                  --seq 4096 --gpus h200 --top 1)

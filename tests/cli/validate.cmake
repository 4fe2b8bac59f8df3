# gpuscout validate: per-category MAPE over the published results (embedded table with sources) and,
# with --results, over the project's own H200 measurements (leave-one-out). The figures themselves are
# pinned by tests/unit/validation_test.cpp.
gpuscout_cli_test(validate_golden 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/validate_public.md --stderr-empty
                  -- --format md validate)
gpuscout_cli_test(validate_json 0 --stdout-json --stdout-contains "\"mape_pct\"" --stdout-contains "Korthikanti"
                  --stderr-empty -- --format json validate)
gpuscout_cli_test(validate_own_results 0 --stdout-contains "own_gemm" --stdout-contains "own_memory"
                  --stdout-contains "leave-one-out" --stderr-empty
                  -- validate --results ${PROJECT_SOURCE_DIR}/bench/results/gemm-h200-20261130-standard.json
                  ${PROJECT_SOURCE_DIR}/bench/results/h200-memory-transfer-20261130-0202-tiled.json)
gpuscout_cli_test(validate_missing_results 1 --stderr-contains "nope.json" --stdout-empty
                  -- validate --results nope.json)
# The project's own Server find-peak runs (8B on one H200, 70B TP2 on two) against the queueing simulation.
gpuscout_cli_test(validate_own_serving 0 --stdout-contains "own_serving" --stdout-contains "find-peak"
                  --stdout-contains "requests/s" --stderr-empty
                  -- validate --results ${PROJECT_SOURCE_DIR}/bench/results/h200x2-serve-llama-3.1-8b-peak-20261130.json
                  ${PROJECT_SOURCE_DIR}/bench/results/h200x2-serve-llama-3.1-70b-tp2-peak-20261130.json)
# Other tools' JSON beside ours in bench/results (a PyTorch reference without schema_version) is
# skipped with a line naming the file and why; the rest is still validated.
gpuscout_cli_test(validate_skips_foreign_json 0 --stdout-contains "own_gemm"
                  --stderr-contains "skipping ${PROJECT_SOURCE_DIR}/bench/results/h200-gemm4096-torch-a-20261130.json"
                  --stderr-contains "not a gpuscout result file: no schema_version"
                  -- validate --results ${PROJECT_SOURCE_DIR}/bench/results/h200-gemm4096-torch-a-20261130.json
                  ${PROJECT_SOURCE_DIR}/bench/results/gemm-h200-20261130-standard.json)
# A gpuscout file with a wrong field still fails, naming the file and the field.
gpuscout_cli_test(validate_malformed_result_fails 1 --stdout-empty --stderr-contains "bad-field.json"
                  --stderr-contains "field 'records"
                  -- validate --results ${PROJECT_SOURCE_DIR}/bench/results/gemm-h200-20261130-standard.json
                  ${PROJECT_SOURCE_DIR}/tests/data/results/bad-field.json)

# gpuscout doctor: runs anywhere (no GPU in CI: the driver check says so and nothing fails), findings
# on stdout, exit 1 on a failed check (with --strict on a warning too).
set(GPUSCOUT_DOCTOR_SPECS ${CMAKE_CURRENT_SOURCE_DIR}/../data/specs)
gpuscout_cli_test(doctor_runs_without_a_gpu 0 --stdout-contains "spec database and model catalog"
                  --stdout-contains "0 fail" --stderr-empty -- --db ${CMAKE_CURRENT_BINARY_DIR}/doctor-history.db doctor)
gpuscout_cli_test(doctor_json 0 --stdout-json --stdout-contains "\"key\": \"data/specs\"" -- --no-history --format json doctor)
gpuscout_cli_test(doctor_no_history 0 --stdout-contains "off (--no-history)" -- --no-history doctor)
gpuscout_cli_test(doctor_launch_blocking_warns 0 --env CUDA_LAUNCH_BLOCKING=1 --stdout-contains "CUDA_LAUNCH_BLOCKING=1"
                  --stdout-contains "1 warn" -- --no-history doctor)
gpuscout_cli_test(doctor_strict_fails_on_a_warning 1 --env CUDA_LAUNCH_BLOCKING=1 --stdout-contains "every kernel launch waits"
                  -- --no-history doctor --strict)
gpuscout_cli_test(doctor_unknown_gpuscout_variable 0 --env GPUSCOUT_GEM_SEARCH=0 --stdout-contains "no such variable"
                  -- --no-history doctor)
gpuscout_cli_test(doctor_bad_data_fails 1 --stdout-contains "fail" --stdout-contains "negative"
                  -- --no-history --specs ${GPUSCOUT_DOCTOR_SPECS}/negative_value doctor)

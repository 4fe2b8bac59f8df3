# gpuscout compare: golden output in every format (numbers masked), the verdicts, records in one run
# only, and exit codes for unreadable, invalid and newer-major result files (1, the file named) and
# bad usage (2).
set(GPUSCOUT_COMPARE_DATA ${CMAKE_CURRENT_SOURCE_DIR}/../data/results)

foreach(pair IN ITEMS "table;txt" "csv;csv" "md;md" "json;json")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  # Run from the source root so that the file names the output shows are the same everywhere.
  gpuscout_cli_test(compare_${format} 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/compare.${ext} --stderr-empty
                    -- --format ${format} compare tests/data/results/compare-a.json tests/data/results/compare-b.json)
  set_tests_properties(cli.compare_${format} PROPERTIES WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()
gpuscout_cli_test(compare_json_parses 0 --stdout-json --stderr-empty
                  -- compare ${GPUSCOUT_COMPARE_DATA}/compare-a.json ${GPUSCOUT_COMPARE_DATA}/compare-b.json --format json)
gpuscout_cli_test(compare_verdicts 0 --stdout-contains "faster" --stdout-contains "slower" --stdout-contains "same"
                  --stdout-contains "unknown" --stdout-contains "failed" --stdout-contains "memory/read/8MiB"
                  --stdout-contains "memory/write/4GiB" --stderr-empty
                  -- compare ${GPUSCOUT_COMPARE_DATA}/compare-a.json ${GPUSCOUT_COMPARE_DATA}/compare-b.json)
gpuscout_cli_test(compare_three_runs 0 --stdout-contains "C/A" --stdout-contains "C verdict" --stderr-empty
                  -- compare ${GPUSCOUT_COMPARE_DATA}/compare-a.json ${GPUSCOUT_COMPARE_DATA}/compare-b.json
                  ${GPUSCOUT_COMPARE_DATA}/compare-a.json)
gpuscout_cli_test(compare_full_runs 0 --stdout-contains "gemm/bf16/m8192_n8192_k8192" --stdout-contains "timeout"
                  --stderr-empty -- compare ${GPUSCOUT_COMPARE_DATA}/fixture-run-a.json
                  ${GPUSCOUT_COMPARE_DATA}/fixture-run-b.json)

gpuscout_cli_test(compare_missing_file_fails 1 --stdout-empty --stderr-contains "no-such-file.json"
                  -- compare ${GPUSCOUT_COMPARE_DATA}/compare-a.json ${GPUSCOUT_COMPARE_DATA}/no-such-file.json)
gpuscout_cli_test(compare_invalid_json_fails 1 --stdout-empty --stderr-contains "invalid.json"
                  -- compare ${GPUSCOUT_COMPARE_DATA}/compare-a.json ${GPUSCOUT_COMPARE_DATA}/invalid.json)
gpuscout_cli_test(compare_newer_major_fails 1 --stdout-empty --stderr-contains "newer-major.json"
                  --stderr-contains "upgrade gpuscout"
                  -- compare ${GPUSCOUT_COMPARE_DATA}/newer-major.json ${GPUSCOUT_COMPARE_DATA}/compare-a.json)
gpuscout_cli_test(compare_bad_field_fails 1 --stdout-empty --stderr-contains "bad-field.json"
                  -- compare ${GPUSCOUT_COMPARE_DATA}/compare-a.json ${GPUSCOUT_COMPARE_DATA}/bad-field.json)
gpuscout_cli_test(compare_needs_two_files 2 --stdout-empty --stderr-contains "at least two"
                  -- compare ${GPUSCOUT_COMPARE_DATA}/compare-a.json)
gpuscout_cli_test(compare_bad_format 2 --stdout-empty --stderr-contains "--format"
                  -- --format html compare ${GPUSCOUT_COMPARE_DATA}/compare-a.json ${GPUSCOUT_COMPARE_DATA}/compare-b.json)
# Another tool's JSON is an error here (the files' order gives the baseline), saying what it is.
gpuscout_cli_test(compare_foreign_json_fails 1 --stdout-empty
                  --stderr-contains "h200-gemm4096-torch-a-20261130.json: not a gpuscout result file: no schema_version"
                  -- compare ${PROJECT_SOURCE_DIR}/bench/results/h200-gemm4096-torch-a-20261130.json
                  ${GPUSCOUT_COMPARE_DATA}/compare-a.json)

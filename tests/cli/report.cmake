# gpuscout report: HTML on stdout with -o -, a file written atomically with -o FILE, and exit codes for
# unreadable, invalid and newer-major result files (1, the file named) and bad usage (2).
set(GPUSCOUT_RESULTS_TEST_DATA ${CMAKE_CURRENT_SOURCE_DIR}/../data/results)

gpuscout_cli_test(report_stdout 0 --stdout-contains "<!DOCTYPE html>" --stdout-contains "<svg"
                  --stdout-contains "GEMM throughput per precision" --stdout-contains "Memory bandwidth vs size"
                  --stdout-contains "Host transfer bandwidth" --stdout-contains "Peer-to-peer matrix"
                  --stdout-contains "busbw vs message size" --stdout-contains "Provenance"
                  --stdout-contains "Definitions" --stdout-contains "L2 50 MB" --stdout-lacks "<script"
                  --stderr-empty -- report ${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-a.json -o -)
gpuscout_cli_test(report_two_runs 0 --stdout-contains "fixture-run-a" --stdout-contains "fixture-run-b"
                  --stdout-contains "My &lt" --stdout-lacks "My <title>" --stdout-contains "fixture &amp" --stderr-empty
                  -- report ${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-a.json ${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-b.json
                  --title "My <title>" --note "fixture & data" -o -)
add_test(NAME cli.report_writes_file
         COMMAND ${CMAKE_COMMAND} -DGPUSCOUT=$<TARGET_FILE:gpuscout> -DINPUT=${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-a.json
                 -DOUTPUT=${CMAKE_CURRENT_BINARY_DIR}/report-test/report.html
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/report_writes_file.cmake)
set_tests_properties(cli.report_writes_file PROPERTIES LABELS cli)

gpuscout_cli_test(report_missing_file_fails 1 --stdout-empty --stderr-contains "no-such-file.json"
                  -- report ${GPUSCOUT_RESULTS_TEST_DATA}/no-such-file.json -o -)
gpuscout_cli_test(report_invalid_json_fails 1 --stdout-empty --stderr-contains "invalid.json"
                  --stderr-contains "not valid JSON" -- report ${GPUSCOUT_RESULTS_TEST_DATA}/invalid.json -o -)
gpuscout_cli_test(report_newer_major_fails 1 --stdout-empty --stderr-contains "newer-major.json"
                  --stderr-contains "upgrade gpuscout" -- report ${GPUSCOUT_RESULTS_TEST_DATA}/newer-major.json -o -)
gpuscout_cli_test(report_bad_field_fails 1 --stdout-empty --stderr-contains "bad-field.json"
                  --stderr-contains "records[0].metrics[0].value" -- report ${GPUSCOUT_RESULTS_TEST_DATA}/bad-field.json -o -)
gpuscout_cli_test(report_unwritable_output_fails 1 --stdout-empty --stderr-contains "no-such-dir"
                  -- report ${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-a.json -o /nonexistent/no-such-dir/r.html)
gpuscout_cli_test(report_needs_output 2 --stdout-empty --stderr-contains "--output"
                  -- report ${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-a.json)
gpuscout_cli_test(report_needs_files 2 --stdout-empty --stderr-contains "files" -- report -o -)

# Headless Chromium renders the report: no console messages, no network requests, every section in the
# DOM; the screenshot stays in the build tree (tests/cli/browser-report/report.png). Skipped (77)
# without chromium.
add_test(NAME browser.report_renders
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/../browser/render_report.sh $<TARGET_FILE:gpuscout>
                 ${CMAKE_CURRENT_BINARY_DIR}/browser-report ${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-a.json
                 ${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-b.json)
set_tests_properties(browser.report_renders PROPERTIES LABELS browser SKIP_RETURN_CODE 77 TIMEOUT 300)
# Other tools' JSON among the files (a PyTorch reference beside ours in bench/results) is skipped with
# a line naming it; only such files is a usage error.
gpuscout_cli_test(report_skips_foreign_json 0 --stdout-contains "<!DOCTYPE html>" --stdout-contains "fixture-run-a"
                  --stderr-contains "skipping ${PROJECT_SOURCE_DIR}/bench/results/h200-gemm4096-torch-a-20261130.json"
                  --stderr-contains "not a gpuscout result file: no schema_version"
                  -- report ${PROJECT_SOURCE_DIR}/bench/results/h200-gemm4096-torch-a-20261130.json
                  ${GPUSCOUT_RESULTS_TEST_DATA}/fixture-run-a.json -o -)
gpuscout_cli_test(report_only_foreign_json_fails 2 --stdout-empty --stderr-contains "none of the files given"
                  -- report ${PROJECT_SOURCE_DIR}/bench/results/h200-gemm4096-torch-a-20261130.json -o -)

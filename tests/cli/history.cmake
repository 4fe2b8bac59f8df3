# gpuscout history: import the committed bench/results files into a temporary database, list (filters,
# every format, $GPUSCOUT_HISTORY_DB), show, export round trip (semantically equal JSON), report
# --from-history, exit 2 for an unknown id or query, exit 1 naming the file for a corrupt database
# (left byte-identical) and for an invalid result file.
set(GPUSCOUT_HISTORY_DIR ${CMAKE_CURRENT_BINARY_DIR}/history-test)
set(GPUSCOUT_HISTORY_DB ${GPUSCOUT_HISTORY_DIR}/history.db)
# The committed result files: JSON under bench/results/ with a schema_version (reference tables such
# as PyTorch timings live there too and are not result documents).
file(GLOB GPUSCOUT_HISTORY_CANDIDATES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/results/*.json)
set(GPUSCOUT_HISTORY_INPUTS)
foreach(candidate IN LISTS GPUSCOUT_HISTORY_CANDIDATES)
  file(READ ${candidate} head LIMIT 400)
  if(head MATCHES "\"schema_version\"")
    list(APPEND GPUSCOUT_HISTORY_INPUTS ${candidate})
  endif()
endforeach()
list(SORT GPUSCOUT_HISTORY_INPUTS)
list(LENGTH GPUSCOUT_HISTORY_INPUTS GPUSCOUT_HISTORY_COUNT)

# Setup: a fresh database holding every committed result file (run i = the i-th file, sorted), each
# export compared with its input, and a second import that stores nothing twice.
add_test(NAME cli.history_import_export_roundtrip
         COMMAND ${CMAKE_COMMAND} -DGPUSCOUT=$<TARGET_FILE:gpuscout> -DDB=${GPUSCOUT_HISTORY_DB}
                 "-DINPUTS=${GPUSCOUT_HISTORY_INPUTS}" -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/history_roundtrip.cmake)
set_tests_properties(cli.history_import_export_roundtrip PROPERTIES LABELS cli FIXTURES_SETUP history_db)

function(gpuscout_history_test name)
  gpuscout_cli_test(${name} ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES FIXTURES_REQUIRED history_db)
endfunction()

gpuscout_history_test(history_list 0 --stdout-contains "NVIDIA H200" --stdout-contains "bench"
                      --stdout-contains "history: ${GPUSCOUT_HISTORY_DB}" --stderr-empty
                      -- --db ${GPUSCOUT_HISTORY_DB} history list)
# The newest two runs are whichever GPU the latest committed files came from: check the database used.
gpuscout_history_test(history_list_env 0 --env GPUSCOUT_HISTORY_DB=${GPUSCOUT_HISTORY_DB}
                      --stdout-contains "history: ${GPUSCOUT_HISTORY_DB}" --stdout-contains "newest 2 shown"
                      --stderr-empty -- history list --limit 2)
foreach(format IN ITEMS csv md)
  gpuscout_history_test(history_list_${format} 0 --stdout-contains "NVIDIA H200" --stderr-empty
                        -- history list --format ${format} --db ${GPUSCOUT_HISTORY_DB})
endforeach()
gpuscout_history_test(history_list_json 0 --stdout-json --stdout-contains "\"records\"" --stderr-empty
                      -- --format json --db ${GPUSCOUT_HISTORY_DB} history list)
gpuscout_history_test(history_list_filters 0 --stdout-contains "NVIDIA H200" --stderr-empty
                      -- --db ${GPUSCOUT_HISTORY_DB} history list --gpu h200 --kind bench --limit 3)
gpuscout_history_test(history_list_tags 0 --stdout-contains "script:quick" --stdout-lacks "run_h200_suite" --stderr-empty
                      -- --db ${GPUSCOUT_HISTORY_DB} history list --tag machine:nvidia-h200 --tag script:quick)
gpuscout_history_test(history_list_no_match 0 --stdout-lacks "NVIDIA H200" --stderr-empty
                      -- --db ${GPUSCOUT_HISTORY_DB} history list --gpu MI300X --tag site:nowhere)
gpuscout_history_test(history_show 0 --stdout-contains "Run 1" --stdout-contains "Records"
                      --stdout-contains "command_line" --stdout-contains "/" --stderr-empty
                      -- --db ${GPUSCOUT_HISTORY_DB} history show 1)
gpuscout_history_test(history_show_json 0 --stdout-json --stdout-contains "\"run\"" --stdout-contains "\"records\""
                      --stderr-empty -- --db ${GPUSCOUT_HISTORY_DB} --format json history show 2)
gpuscout_history_test(history_show_unknown_id 2 --stdout-empty --stderr-contains "999999"
                      -- --db ${GPUSCOUT_HISTORY_DB} history show 999999)
gpuscout_history_test(history_export_unknown_id 2 --stdout-empty --stderr-contains "999999"
                      -- --db ${GPUSCOUT_HISTORY_DB} history export 999999)
gpuscout_history_test(history_show_bad_id 2 --stdout-empty --stderr-contains "not a number"
                      -- --db ${GPUSCOUT_HISTORY_DB} history show first)
gpuscout_history_test(history_report_last 0 --stdout-contains "<!DOCTYPE html>" --stdout-contains "history run"
                      --stderr-empty -- --db ${GPUSCOUT_HISTORY_DB} report --from-history last -o -)
gpuscout_history_test(history_report_gpu 0 --stdout-contains "<!DOCTYPE html>" --stdout-contains "history run 1 "
                      --stderr-empty -- --db ${GPUSCOUT_HISTORY_DB} report --from-history gpu:H200 -o -)
gpuscout_history_test(history_report_no_match 2 --stdout-empty --stderr-contains "gpu:MI300X"
                      -- --db ${GPUSCOUT_HISTORY_DB} report --from-history gpu:MI300X -o -)
gpuscout_history_test(history_report_bad_query 2 --stdout-empty --stderr-contains "newest"
                      -- --db ${GPUSCOUT_HISTORY_DB} report --from-history newest -o -)

gpuscout_history_test(history_report_history_and_file 0 --stdout-contains "history run "
                      --stdout-contains "fixture-run-a" --stderr-empty -- --db ${GPUSCOUT_HISTORY_DB} report
                      --from-history last ${PROJECT_SOURCE_DIR}/tests/data/results/fixture-run-a.json -o -)
gpuscout_cli_test(history_list_missing_db 0 --stdout-contains "no history database yet" --stderr-empty
                  -- --db ${GPUSCOUT_HISTORY_DIR}/never-created.db history list)
gpuscout_cli_test(history_show_missing_db 1 --stdout-empty --stderr-contains "no-such.db"
                  -- --db ${GPUSCOUT_HISTORY_DIR}/no-such.db history show 1)
gpuscout_cli_test(history_import_invalid 1 --stderr-contains "invalid.json" --stderr-contains "not valid JSON"
                  -- --db ${GPUSCOUT_HISTORY_DIR}/invalid-import.db history import
                  ${PROJECT_SOURCE_DIR}/tests/data/results/invalid.json)
gpuscout_cli_test(history_needs_subcommand 2 --stdout-empty -- history)

add_test(NAME cli.history_corrupt_db
         COMMAND ${CMAKE_COMMAND} -DGPUSCOUT=$<TARGET_FILE:gpuscout> -DDB=${GPUSCOUT_HISTORY_DIR}/corrupt.db
                 -DINPUT=${PROJECT_SOURCE_DIR}/tests/data/results/compare-a.json
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/history_corrupt.cmake)
set_tests_properties(cli.history_corrupt_db PROPERTIES LABELS cli)

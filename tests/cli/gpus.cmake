# gpuscout gpus list|show|compare: every output format against golden files (numbers masked), stream
# separation, lookups by alias, filters, unknown names, and data directories given by --specs / $GPUSCOUT_DATA.
set(GPUSCOUT_SPECS_TEST_DATA ${CMAKE_CURRENT_SOURCE_DIR}/../data/specs)

foreach(pair IN ITEMS "table;txt" "csv;csv" "md;md" "json;json")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  gpuscout_cli_test(gpus_list_${format} 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/gpus_list.${ext} --stderr-empty
                    -- --format ${format} gpus list)
  gpuscout_cli_test(gpus_show_${format} 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/gpus_show.${ext} --stderr-empty
                    -- --format ${format} gpus show h200)
  gpuscout_cli_test(gpus_compare_${format} 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/gpus_compare.${ext} --stderr-empty
                    -- --format ${format} gpus compare h100 h200 b200 mi300x)
endforeach()

gpuscout_cli_test(gpus_list_json_parses 0 --stdout-json --stdout-contains "\"bf16_tflops\": 989.4" --stderr-empty
                  -- gpus list --format json)
gpuscout_cli_test(gpus_show_json_parses 0 --stdout-json --stdout-contains "\"source\"" --stderr-empty
                  -- gpus show "NVIDIA H100 80GB HBM3" --format json)
gpuscout_cli_test(gpus_compare_json_parses 0 --stdout-json --stdout-contains "\"ratio_to_first\"" --stderr-empty
                  -- gpus compare h800 h100 --format json)
# Dense peaks only: the H100 SXM sparse BF16 figure (1979) is never shown as a peak.
gpuscout_cli_test(gpus_show_dense_only 0 --stdout-contains "989.4" --stdout-lacks "| 1979 |" --stderr-empty
                  -- gpus show h100 --format md)
gpuscout_cli_test(gpus_show_marks_uncertain 0 --stdout-contains "78?" --stdout-contains "294 vs 296" --stderr-empty
                  -- gpus show h20)
gpuscout_cli_test(gpus_compare_h800_nvlink 0 --stdout-contains "scale_up_bw_gbs_bidir,GB/s,400,900" --stderr-empty
                  -- gpus compare h800 h100 --format csv)
gpuscout_cli_test(gpus_list_vendor 0 --stdout-contains "MI300X" --stdout-contains "MI325X" --stdout-lacks "H100"
                  --stderr-empty -- gpus list --vendor amd)
gpuscout_cli_test(gpus_list_arch 0 --stdout-contains "H200-NVL-141GB" --stdout-lacks "B200" --stdout-lacks "A100"
                  --stderr-empty -- gpus list --arch hopper --format csv)
gpuscout_cli_test(gpus_list_unknown_vendor_is_usage_error 2 --stdout-empty --stderr-contains "known vendors: AMD, NVIDIA"
                  -- gpus list --vendor intel)
gpuscout_cli_test(gpus_show_unknown_is_usage_error 2 --stdout-empty --stderr-contains "unknown GPU 'h100x'"
                  --stderr-contains "did you mean" --stderr-contains "H100-SXM5-80GB" -- gpus show h100x)
gpuscout_cli_test(gpus_show_unknown_far_names_the_list 2 --stdout-empty --stderr-contains "unknown GPU 'zzz9'"
                  --stderr-contains "`gpuscout gpus list` lists them" -- gpus show zzz9)
gpuscout_cli_test(gpus_compare_unknown_is_usage_error 2 --stdout-empty --stderr-contains "unknown GPU 'mi300'"
                  --stderr-contains "MI300X" -- gpus compare h100 mi300)
gpuscout_cli_test(gpus_compare_needs_two 2 --stdout-empty --stderr-contains "at least two" -- gpus compare h100)
gpuscout_cli_test(gpus_compare_same_gpu_twice 2 --stdout-empty --stderr-contains "second time"
                  -- gpus compare h100 "H100 SXM")
gpuscout_cli_test(gpus_show_needs_a_name 2 --stdout-empty --stderr-contains "name" -- gpus show)
gpuscout_cli_test(gpus_needs_a_subcommand 2 --stdout-empty --stderr-contains "subcommand" -- gpus)

# Data directories replace the embedded database; a bad file fails with exit 1 naming file, entry, field.
gpuscout_cli_test(gpus_list_specs_dir 0 --stdout-contains "Test-GPU" --stdout-lacks "H100" --stderr-empty
                  -- --specs ${GPUSCOUT_SPECS_TEST_DATA}/valid gpus list)
gpuscout_cli_test(gpus_list_env_data 0 --env GPUSCOUT_DATA=${GPUSCOUT_SPECS_TEST_DATA}/valid
                  --stdout-contains "Test-GPU" --stdout-lacks "H100" --stderr-empty -- gpus list)
gpuscout_cli_test(gpus_bad_file_fails 1 --stdout-empty --stderr-contains "test-gpu.toml"
                  --stderr-contains "entry 'Test-GPU'" --stderr-contains "field 'power.tdp_w'"
                  -- --specs ${GPUSCOUT_SPECS_TEST_DATA}/negative_value gpus list)
gpuscout_cli_test(gpus_duplicate_alias_fails 1 --stdout-empty --stderr-contains "first-gpu.toml"
                  --stderr-contains "second-gpu.toml" -- --specs ${GPUSCOUT_SPECS_TEST_DATA}/duplicate_alias gpus list)

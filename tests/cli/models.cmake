# gpuscout models list|show: every output format against golden files (numbers masked), stream
# separation, lookups by alias, unknown names and bad catalog files.
set(GPUSCOUT_MODELS_TEST_DATA ${CMAKE_CURRENT_SOURCE_DIR}/../data/models)

foreach(pair IN ITEMS "table;txt" "csv;csv" "md;md" "json;json")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  gpuscout_cli_test(models_list_${format} 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/models_list.${ext} --stderr-empty
                    -- --format ${format} models list)
  gpuscout_cli_test(models_show_${format} 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/models_show.${ext} --stderr-empty
                    -- --format ${format} models show Llama-3.1-8B)
endforeach()
gpuscout_cli_test(models_show_moe_mla 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/models_show_deepseek.txt --stderr-empty
                  -- models show DeepSeek-V3)
gpuscout_cli_test(models_show_encoder 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/models_show_bert.txt --stderr-empty
                  -- models show bert-large-uncased)

gpuscout_cli_test(models_list_json_parses 0 --stdout-json --stderr-empty -- models list --format json)
gpuscout_cli_test(models_show_json_parses 0 --stdout-json --stdout-contains "\"difference_pct\"" --stderr-empty
                  -- models show mixtral-8x7b --format json)
gpuscout_cli_test(models_list_family 0 --stdout-contains "Mixtral-8x22B" --stdout-lacks "Llama" --stderr-empty
                  -- models list --family Mixtral)
gpuscout_cli_test(models_show_by_alias 0 --stdout-contains "Llama-3.1-8B" --stdout-contains "131072" --stderr-empty
                  -- models show meta-llama/Llama-3.1-8B)
gpuscout_cli_test(models_show_unknown_is_usage_error 2 --stdout-empty --stderr-contains "unknown model 'llama-3.1-9b'"
                  --stderr-contains "did you mean" --stderr-contains "Llama-3.1-8B" -- models show llama-3.1-9b)
# Nothing close to suggest: the message says where the names are listed (and only then).
gpuscout_cli_test(models_show_unknown_far_names_the_list 2 --stdout-empty --stderr-contains "unknown model 'qqqq'"
                  --stderr-contains "`gpuscout models list` lists them" -- models show qqqq)
gpuscout_cli_test(models_show_unknown_near_has_no_list_hint 2 --stdout-empty --stderr-contains "did you mean"
                  --stderr-lacks "lists them" -- models show llama-3.1-9b)
gpuscout_cli_test(models_list_unknown_family_is_usage_error 2 --stdout-empty --stderr-contains "llama-3.1"
                  -- models list --family lama-3)
gpuscout_cli_test(models_show_needs_a_name 2 --stdout-empty --stderr-contains "name" -- models show)
gpuscout_cli_test(models_needs_a_subcommand 2 --stdout-empty --stderr-contains "subcommand" -- models)
gpuscout_cli_test(models_bad_catalog_file_fails 1 --stdout-empty --stderr-contains "tiny.toml"
                  --stderr-contains "'architecture.kv_heads'"
                  -- --specs ${GPUSCOUT_MODELS_TEST_DATA}/bad_kv_heads models list)

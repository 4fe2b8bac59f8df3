# gpuscout tco: own vs rent, golden files in every format (numbers masked), overrides by --set,
# --years and --config, and bad requests as usage errors naming the flag.
set(GPUSCOUT_TCO_TEST_DATA ${CMAKE_CURRENT_SOURCE_DIR}/../data/tco)
foreach(pair IN ITEMS "table;txt" "csv;csv" "md;md" "json;json")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  gpuscout_cli_test(tco_h100_${format} 0 --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/tco_h100.${ext} --stderr-empty
                    -- --format ${format} tco --gpu h100 --gpus 8 --tokens-per-s 20000)
endforeach()
gpuscout_cli_test(tco_json_parses 0 --stdout-json --stdout-contains "\"usd_per_useful_gpu_hr\"" --stderr-empty
                  -- tco --gpu b200 --format json)
# specs.md §8.4 worked example: H100 SXM $1.84 per GPU-hour, $2.63 at 70% utilization.
gpuscout_cli_test(tco_h100_worked_example 0 --stdout-contains "own,1.8376,2.6251" --stderr-empty
                  -- tco --gpu h100 --format csv)
gpuscout_cli_test(tco_set_is_labelled 0 --stdout-contains "pue,1.1,1.1,1.58,ratio,--set" --stderr-empty
                  -- tco --gpu h100 --set pue=1.1 --format csv)
gpuscout_cli_test(tco_years_flag 0 --stdout-contains "over 3 years" --stdout-contains "--years" --stderr-empty
                  -- tco --gpu h100 --years 3)
gpuscout_cli_test(tco_config_file 0 --stdout-contains "electricity_usd_per_kwh,0.12" --stdout-contains "config "
                  --stderr-empty -- tco --gpu h200 --config ${GPUSCOUT_TCO_TEST_DATA}/override.toml --format csv)
gpuscout_cli_test(tco_derived_capex_is_labelled 0 --stdout-contains "derived" --stdout-contains "server overhead"
                  --stderr-empty -- tco --gpu l40s)

gpuscout_cli_test(tco_unknown_gpu 2 --stdout-empty --stderr-contains "unknown GPU 'h101'" -- tco --gpu h101)
gpuscout_cli_test(tco_missing_gpu 2 --stdout-empty --stderr-contains "--gpu" -- tco)
gpuscout_cli_test(tco_zero_gpus 2 --stdout-empty --stderr-contains "--gpus" -- tco --gpu h100 --gpus 0)
gpuscout_cli_test(tco_negative_tokens 2 --stdout-empty --stderr-contains "--tokens-per-s" -- tco --gpu h100
                  --tokens-per-s -1)
gpuscout_cli_test(tco_bad_set 2 --stdout-empty --stderr-contains "--set" -- tco --gpu h100 --set pue)
gpuscout_cli_test(tco_unknown_key 2 --stdout-empty --stderr-contains "unknown TCO parameter 'pue2'" -- tco --gpu h100
                  --set pue2=1)
gpuscout_cli_test(tco_fraction_out_of_range 2 --stdout-empty --stderr-contains "utilization" -- tco --gpu h100
                  --set utilization=1.5)
gpuscout_cli_test(tco_missing_config 2 --stdout-empty --stderr-contains "--config" -- tco --gpu h100 --config
                  /nonexistent/tco.toml)
gpuscout_cli_test(tco_bad_config_key 1 --stdout-empty --stderr-contains "bad_key.toml" --stderr-contains "utilisation"
                  -- tco --gpu h100 --config ${GPUSCOUT_TCO_TEST_DATA}/bad_key.toml)

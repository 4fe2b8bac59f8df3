# The README's main job: A100, H100, H200 and H800 compared for a 70B model.
gpuscout_cli_test(main_job_compare_for_70b 0 --stderr-empty --stdout-golden ${GPUSCOUT_CLI_GOLDEN}/gpus_compare_model.md --
  gpus compare A100-SXM4-80GB H100-SXM5-80GB H200-SXM-141GB H800-SXM5-80GB --model llama-3.1-70b --format md)
gpuscout_cli_test(compare_model_json 0 --stdout-json --stdout-contains "model_fit" --stdout-contains "gpus_needed" --
  gpus compare h100 h200 --model llama-3.1-70b --format json)
gpuscout_cli_test(compare_unknown_model 2 --stdout-empty --stderr-contains "unknown model 'llama-9'" --
  gpus compare h100 h200 --model llama-9)
gpuscout_cli_test(compare_bad_weights 2 --stdout-empty --stderr-contains "--weights" --
  gpus compare h100 h200 --model llama-3.1-70b --weights int3)
gpuscout_cli_test(compare_model_too_big 0 --stdout-contains "do not fit 8 x T4" --
  gpus compare t4 h200 --model llama-3.1-405b)

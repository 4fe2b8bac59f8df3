# Exit codes and stream separation of the top-level command.
gpuscout_cli_test(no_subcommand_is_usage_error 2 --stdout-empty --stderr-contains "subcommand" --)
gpuscout_cli_test(unknown_flag_is_usage_error 2 --stdout-empty --stderr-contains "--no-such-flag" -- gpus --no-such-flag)
gpuscout_cli_test(help_goes_to_stdout 0 --stdout-contains "Exit codes" --stderr-empty -- --help)
gpuscout_cli_test(version 0 --stdout-contains "gpuscout 0." -- --version)
gpuscout_cli_test(missing_specs_dir_is_usage_error 2 --stdout-empty --stderr-contains "--specs" -- --specs /nonexistent/dir gpus list)

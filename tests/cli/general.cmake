# Exit codes and stream separation of the top-level command.
gpuscout_cli_test(no_subcommand_is_usage_error 2 --stdout-empty --stderr-contains "subcommand" --)
gpuscout_cli_test(unknown_flag_is_usage_error 2 --stdout-empty --stderr-contains "--no-such-flag" -- gpus --no-such-flag)
gpuscout_cli_test(help_goes_to_stdout 0 --stdout-contains "Exit codes" --stderr-empty -- --help)
gpuscout_cli_test(version 0 --stdout-contains "gpuscout 0." -- --version)
gpuscout_cli_test(missing_specs_dir_is_usage_error 2 --stdout-empty --stderr-contains "--specs" -- --specs /nonexistent/dir gpus list)

# The commit recorded in result files is read at build time (cmake/git_commit.cmake).
add_test(NAME cli.git_commit_at_build_time
         COMMAND ${CMAKE_COMMAND} -DSCRIPT=${PROJECT_SOURCE_DIR}/cmake/git_commit.cmake
                 -DWORK=${CMAKE_CURRENT_BINARY_DIR}/git-commit-test -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/git_commit.cmake)
set_tests_properties(cli.git_commit_at_build_time PROPERTIES LABELS cli)

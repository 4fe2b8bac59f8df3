# Writes OUTPUT, a source file defining gpuscout::kGitCommit, from the source tree's git state at
# build time: the short commit, "-dirty" when tracked files differ from it, "unknown" without git.
# The file is rewritten only when the text changes, so an unchanged tree recompiles nothing.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -P git_commit.cmake
execute_process(
  COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE commit
  RESULT_VARIABLE rc
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(rc OR NOT commit)
  set(commit "unknown")
else()
  # --no-optional-locks: status must not take index.lock, which a concurrent `git commit` needs.
  execute_process(
    COMMAND git --no-optional-locks status --porcelain --untracked-files=no
    WORKING_DIRECTORY ${SOURCE_DIR}
    OUTPUT_VARIABLE changes
    RESULT_VARIABLE rc
    ERROR_QUIET)
  if(rc)
    string(APPEND commit "-unknown-state")
  elseif(changes)
    string(APPEND commit "-dirty")
  endif()
endif()
string(CONCAT text "// Generated at build time by cmake/git_commit.cmake.\n#include \"gpuscout/version.hpp\"\n\n"
       "namespace gpuscout {\nconst char* const kGitCommit = \"${commit}\";\n}  // namespace gpuscout\n")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()

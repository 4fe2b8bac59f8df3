# Imports INPUTS (result files) one by one into a fresh database DB (run i = the i-th file), then
# exports every run, to a file and to stdout, and checks that each export equals its input as JSON;
# a second import of all files stores nothing twice.
get_filename_component(dir ${DB} DIRECTORY)
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(id 0)
foreach(input IN LISTS INPUTS)
  math(EXPR id "${id} + 1")
  execute_process(COMMAND ${GPUSCOUT} --db ${DB} history import ${input} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "added")
    message(FATAL_ERROR "import ${input}: exit ${rc}\n${out}\n${err}")
  endif()
endforeach()
set(id 0)
foreach(input IN LISTS INPUTS)
  math(EXPR id "${id} + 1")
  set(exported ${dir}/export-${id}.json)
  execute_process(COMMAND ${GPUSCOUT} --db ${DB} history export ${id} -o ${exported} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out STREQUAL "")
    message(FATAL_ERROR "export ${id}: exit ${rc}\n${out}\n${err}")
  endif()
  execute_process(COMMAND ${GPUSCOUT} history export ${id} --db ${DB} RESULT_VARIABLE rc
                  OUTPUT_FILE ${dir}/stdout-${id}.json ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "export ${id} to stdout: exit ${rc}\n${err}")
  endif()
  foreach(copy IN ITEMS ${exported} ${dir}/stdout-${id}.json)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
              "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a==b else 1)"
              ${input} ${copy}
      RESULT_VARIABLE same)
    if(NOT same EQUAL 0)
      message(FATAL_ERROR "run ${id}: ${copy} differs from ${input}")
    endif()
  endforeach()
endforeach()
file(GLOB leftovers ${dir}/.*tmp*)
if(leftovers)
  message(FATAL_ERROR "temporary files left: ${leftovers}")
endif()
execute_process(COMMAND ${GPUSCOUT} --db ${DB} history import ${INPUTS} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR out MATCHES " added" OR NOT out MATCHES "already stored")
  message(FATAL_ERROR "second import stored something again: exit ${rc}\n${out}\n${err}")
endif()

# Runs stack_check on an object over the budget: it must exit 1 and name the
# program, its bytes and its chain.
execute_process(COMMAND ${CHECK} --limit 384 --max-frames 6 ${OBJ}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "stack_check said: ${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "stack_check exited ${rc}, not 1, on a chain over the budget")
endif()
if(NOT out MATCHES "OVER +stack_over.bpf.o +sf_fix_entry +448 bytes \\(limit 384\\) 2 frames: sf_fix_entry 192 > sf_fix_callee 232")
  message(FATAL_ERROR "stack_check did not name the program and its chain")
endif()

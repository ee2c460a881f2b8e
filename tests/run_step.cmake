# refdec_step(<what> <command>...): runs a command from a -P script, failing the script with
# "<what> failed" when it returns non-zero.
function(refdec_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${what} failed: ${rc}")
  endif()
endfunction()

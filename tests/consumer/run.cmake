# Installs refdec into a private prefix, then configures, builds and runs a consumer project that
# finds it with find_package(refdec).
set(prefix ${BINARY_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR}/refdec -DREFDEC_BUILD_TESTS=OFF
                        -DREFDEC_BUILD_BENCHMARKS=OFF -DREFDEC_BUILD_EXAMPLES=OFF -DREFDEC_WITH_CUDA=OFF
                        -DCMAKE_INSTALL_PREFIX=${prefix} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring refdec failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR}/refdec RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "installing refdec failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/project -B ${BINARY_DIR}/project
                        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer project failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR}/project RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer project failed")
endif()
execute_process(COMMAND ${BINARY_DIR}/project/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer program failed: ${rc}")
endif()

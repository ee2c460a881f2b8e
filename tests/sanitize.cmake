# Configures, builds and runs the torch-free tests with -fsanitize=address,undefined.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -DCMAKE_BUILD_TYPE=Debug
                        -DCMAKE_CXX_COMPILER=${CXX} -DREFDEC_SANITIZE=ON -DREFDEC_WITH_TORCH=OFF -DREFDEC_WITH_CUDA=OFF
                        -DREFDEC_BUILD_BENCHMARKS=OFF -DREFDEC_BUILD_EXAMPLES=OFF
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "sanitizer configure failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} -j2 --target refdec_core_tests RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "sanitizer build failed: ${rc}")
endif()
execute_process(COMMAND ${BINARY_DIR}/tests/refdec_core_tests RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "sanitized tests failed: ${rc}")
endif()

# Configures, builds and runs the torch-free tests and the C API's program with
# -fsanitize=address,undefined.
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)
refdec_step("sanitizer configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -DCMAKE_BUILD_TYPE=Debug
            -DCMAKE_CXX_COMPILER=${CXX} -DREFDEC_SANITIZE=ON -DREFDEC_WITH_TORCH=OFF -DREFDEC_WITH_CUDA=OFF
            -DREFDEC_BUILD_BENCHMARKS=OFF -DREFDEC_BUILD_EXAMPLES=OFF)
refdec_step("sanitizer build" ${CMAKE_COMMAND} --build ${BINARY_DIR} -j2 --target refdec_core_tests refdec_c_api_test)
refdec_step("sanitized tests" ${BINARY_DIR}/tests/refdec_core_tests)
# The C API's program and shim: exit 77 (no model) has still run the model-free checks.
execute_process(COMMAND ${BINARY_DIR}/tests/refdec_c_api_test RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 AND NOT rc EQUAL 77)
  message(FATAL_ERROR "sanitized C API test failed: ${rc}")
endif()

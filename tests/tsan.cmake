# Configures, builds and runs the threading tests with -fsanitize=thread in a build tree of their
# own (with libtorch where it is installed: one Session per thread).
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)
refdec_step("tsan configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -DCMAKE_BUILD_TYPE=Debug
            -DCMAKE_CXX_COMPILER=${CXX} -DREFDEC_TSAN=ON -DREFDEC_WITH_CUDA=OFF
            -DREFDEC_BUILD_BENCHMARKS=OFF -DREFDEC_BUILD_EXAMPLES=OFF -DREFDEC_BUILD_TOOLS=OFF)
refdec_step("tsan build" ${CMAKE_COMMAND} --build ${BINARY_DIR} -j2 --target refdec_threading_tests)
refdec_step("tsan threading tests" ${CMAKE_COMMAND} -E env TSAN_OPTIONS=halt_on_error=1 ${BINARY_DIR}/tests/refdec_threading_tests)
if(EXISTS ${BINARY_DIR}/tests/CMakeFiles/refdec_session_threading_tests.dir)
  refdec_step("tsan session build" ${CMAKE_COMMAND} --build ${BINARY_DIR} -j2 --target refdec_session_threading_tests)
  refdec_step("tsan session tests" ${CMAKE_COMMAND} -E env TSAN_OPTIONS=halt_on_error=1
              ${BINARY_DIR}/tests/refdec_session_threading_tests)
endif()

# Builds refdec._core with -fsanitize=address,undefined in a tree of its own and runs the Python
# tests of the torch-free part against it: the interpreter is not sanitized, so the sanitizers'
# runtimes are preloaded (leak checks off: CPython keeps its allocations to the end on purpose).
# Torch is blocked (test_no_torch's way), so the tests of the torch part report themselves
# skipped. Exit 77 (skipped) where the compiler has no ASan runtime or Python has no pytest.
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)
execute_process(COMMAND ${CXX} -print-file-name=libasan.so OUTPUT_VARIABLE asan OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${CXX} -print-file-name=libubsan.so OUTPUT_VARIABLE ubsan OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT IS_ABSOLUTE "${asan}" OR NOT IS_ABSOLUTE "${ubsan}")
  message("sanitized Python tests skipped: ${CXX} has no libasan.so or libubsan.so to preload")
  return()
endif()
refdec_step("sanitized Python configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -DCMAKE_BUILD_TYPE=Debug
            -DCMAKE_CXX_COMPILER=${CXX} -DREFDEC_SANITIZE=ON -DREFDEC_WITH_TORCH=OFF -DREFDEC_WITH_CUDA=OFF
            -DREFDEC_BUILD_BENCHMARKS=OFF -DREFDEC_BUILD_EXAMPLES=OFF -DREFDEC_PYTHON=${PYTHON})
refdec_step("sanitized Python build" ${CMAKE_COMMAND} --build ${BINARY_DIR} -j2 --target refdec_python)
set(files)
foreach(name test_trees test_plan_walk test_drafters test_datastore test_sampling test_step_driver test_errors test_threads)
  list(APPEND files ${SOURCE_DIR}/python/tests/${name}.py)
endforeach()
refdec_step("sanitized Python tests"
  ${CMAKE_COMMAND} -E env "LD_PRELOAD=${asan}:${ubsan}" "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
  "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1" "PYTHONPATH=${BINARY_DIR}/python" "PYTHONDONTWRITEBYTECODE=1"
  "REFDEC_DEFAULT_DATA_DIR=${DATA_DIR}" "REFDEC_BLOCK_TORCH=1"
  ${PYTHON} -m pytest -q -p no:cacheprovider -rs --basetemp=${BINARY_DIR}/pytest ${files})

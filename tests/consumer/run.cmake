# Installs refdec into a private prefix, then configures, builds and runs a consumer project that
# finds it with find_package(refdec): refdec::core always, refdec::torch (a Session) with libtorch;
# then asks for components: core alone (libtorch hidden), torch, an unknown one.
include(${CMAKE_CURRENT_LIST_DIR}/../run_step.cmake)
set(prefix ${BINARY_DIR}/prefix)
refdec_step("configuring refdec" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR}/refdec -DREFDEC_BUILD_TESTS=OFF
            -DREFDEC_BUILD_BENCHMARKS=OFF -DREFDEC_BUILD_EXAMPLES=OFF -DREFDEC_BUILD_TOOLS=OFF -DREFDEC_BUILD_PYTHON=OFF -DREFDEC_WITH_CUDA=OFF
            -DREFDEC_BUILD_C_STATIC=ON -DCMAKE_INSTALL_PREFIX=${prefix})
refdec_step("building refdec (the C API's library)" ${CMAKE_COMMAND} --build ${BINARY_DIR}/refdec)
refdec_step("installing refdec" ${CMAKE_COMMAND} --install ${BINARY_DIR}/refdec)
# The exported targets must not point into this machine's library paths.
file(GLOB targets ${prefix}/lib*/cmake/refdec/refdecTargets*.cmake)
foreach(f ${targets})
  file(STRINGS ${f} links REGEX "INTERFACE_LINK_LIBRARIES")
  if(links MATCHES "\"[^\"]*/[^\"]*\\.(so|a)[;\"]")
    message(FATAL_ERROR "exported targets link absolute library paths: ${links}")
  endif()
endforeach()
refdec_step("configuring the consumer project" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/project
            -B ${BINARY_DIR}/project -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX})
refdec_step("building the consumer project" ${CMAKE_COMMAND} --build ${BINARY_DIR}/project)
refdec_step("the consumer program" ${BINARY_DIR}/project/consumer)
if(EXISTS ${BINARY_DIR}/project/consumer_torch)
  refdec_step("the consumer's Session" ${BINARY_DIR}/project/consumer_torch)
endif()
refdec_step("the consumer's C program" ${BINARY_DIR}/project/consumer_c)

# configure(<name> <expect: ok|fail> <needle> <args>...): configures the consumer project in a tree
# of its own with <args>; it must succeed, or fail with <needle> in its output.
function(configure name expect needle)
  file(REMOVE_RECURSE ${BINARY_DIR}/${name})
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/project -B ${BINARY_DIR}/${name}
                          -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect STREQUAL "ok" AND rc)
    message(FATAL_ERROR "consumer ${name}: configuring failed:\n${out}${err}")
  elseif(expect STREQUAL "fail" AND (NOT rc OR NOT "${out}${err}" MATCHES "${needle}"))
    message(FATAL_ERROR "consumer ${name}: expected a failure naming '${needle}', got rc ${rc}:\n${out}${err}")
  endif()
endfunction()
# Only the core, on a machine where libtorch cannot be found: refdec::core alone, built and run.
configure(core_only ok "" -DCOMPONENTS=core -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON)
refdec_step("building the core-only consumer" ${CMAKE_COMMAND} --build ${BINARY_DIR}/core_only)
refdec_step("the core-only consumer" ${BINARY_DIR}/core_only/consumer)
configure(unknown fail "no component 'fast_path'" -DCOMPONENTS=core,fast_path)
if(EXISTS ${BINARY_DIR}/project/consumer_torch)
  configure(torch ok "" -DCOMPONENTS=torch)
  configure(torch_missing fail "refdec::torch needs libtorch" -DCOMPONENTS=torch -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON)
endif()

# cmake -P script: builds and runs tests/consumer/project against Luminal.
#   MODE=find_package      install the build tree into a temporary prefix, then
#                          find_package(Luminal CONFIG REQUIRED) from it
#   MODE=add_subdirectory  add_subdirectory(<Luminal source>) inside the consumer
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "consumer (${MODE}): command failed (${rc}): ${cmd}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(extra "")
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install ${LUMINAL_BINARY_DIR} --prefix ${prefix})
  # The installed tree must hold the public headers, the library and its CMake package only.
  file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
  foreach(f IN LISTS installed)
    if(NOT f MATCHES "^include/luminal/" AND NOT f MATCHES "^lib[^/]*/libluminal\\.(so|a)" AND
       NOT f MATCHES "^lib[^/]*/cmake/Luminal/")
      message(FATAL_ERROR "consumer (find_package): unexpected file installed: ${f}")
    endif()
  endforeach()
  set(extra -DCMAKE_PREFIX_PATH=${prefix})
  # Asking for a backend this build lacks must fail at configure time with a clear message.
  foreach(comp IN ITEMS CUDA HIP)
    file(READ ${prefix}/lib/cmake/Luminal/LuminalConfig.cmake config)
    if(config MATCHES "set\\(Luminal_${comp}_FOUND ON\\)")
      continue()
    endif()
    set(probe ${WORK_DIR}/probe_${comp})
    file(MAKE_DIRECTORY ${probe})
    file(WRITE ${probe}/CMakeLists.txt
      "cmake_minimum_required(VERSION 3.25)\nproject(p LANGUAGES NONE)\nfind_package(Luminal CONFIG REQUIRED COMPONENTS ${comp})\n")
    execute_process(COMMAND ${CMAKE_COMMAND} -S ${probe} -B ${probe}/build -DCMAKE_PREFIX_PATH=${prefix}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(rc EQUAL 0)
      message(FATAL_ERROR "find_package(Luminal COMPONENTS ${comp}) succeeded without a ${comp} backend")
    endif()
    if(NOT err MATCHES "built without its ${comp} backend")
      message(FATAL_ERROR "find_package(Luminal COMPONENTS ${comp}) failed without the expected message:\n${err}")
    endif()
  endforeach()
else()
  set(extra -DLUMINAL_SOURCE_DIR=${LUMINAL_SOURCE_DIR})
endif()

run(${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/project -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCONSUMER_MODE=${MODE} ${extra})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)

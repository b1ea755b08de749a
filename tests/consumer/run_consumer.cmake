# cmake -P script: builds and runs tests/consumer/project against Luminal.
#   MODE=find_package      install the build tree into a temporary prefix, then
#                          find_package(Luminal CONFIG REQUIRED) from it
#   MODE=add_subdirectory  add_subdirectory(<Luminal source>) inside the consumer, built
#                          as a STATIC library (BUILD_SHARED_LIBS=OFF) with no build type
#                          (which Luminal must not change); that static build is then
#                          installed and a second consumer finds it with find_package
# So both library kinds are built, installed, found and run, at the cost of one library
# build (the add_subdirectory one, which compiles Luminal anyway).
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

# Installs the Luminal build in `build_dir` into `prefix` and checks what was installed.
function(install_luminal build_dir prefix)
  run(${CMAKE_COMMAND} --install ${build_dir} --prefix ${prefix})
  # The installed tree must hold the public headers, the library and its CMake package only.
  file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
  foreach(f IN LISTS installed)
    if(NOT f MATCHES "^include/luminal/" AND NOT f MATCHES "^lib[^/]*/libluminal\\.(so|a)" AND
       NOT f MATCHES "^lib[^/]*/cmake/Luminal/")
      message(FATAL_ERROR "consumer (${MODE}): unexpected file installed: ${f}")
    endif()
  endforeach()
endfunction()

# Configures, builds and runs the consumer project in `dir` (the remaining arguments are
# cache settings).
# A compiler launcher of the outer build (ccache) is passed on, so a developer's rebuild of
# the consumer's copy of Luminal hits the same cache; CI sets none. So is a unity build
# (CI's): the consumer's copy of Luminal then compiles the way the outer one did.
function(build_and_run dir)
  set(settings)
  if(LAUNCHER)
    set(settings -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
  endif()
  if(UNITY)
    list(APPEND settings -DCMAKE_UNITY_BUILD=ON)
  endif()
  run(${CMAKE_COMMAND} -S ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/project -B ${dir} -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} ${settings} ${ARGN})
  run(${CMAKE_COMMAND} --build ${dir})
  run(${dir}/consumer)
endfunction()

set(prefix ${WORK_DIR}/prefix)
if(MODE STREQUAL "find_package")
  install_luminal(${LUMINAL_BINARY_DIR} ${prefix})
  # Asking for a backend this build lacks must fail at configure time with a clear message.
  foreach(comp IN ITEMS CUDA HIP)
    file(READ ${prefix}/lib/cmake/Luminal/LuminalConfig.cmake config)
    set(probe ${WORK_DIR}/probe_${comp})
    file(MAKE_DIRECTORY ${probe})
    file(WRITE ${probe}/CMakeLists.txt
      "cmake_minimum_required(VERSION 3.25)\nproject(p LANGUAGES NONE)\nfind_package(Luminal CONFIG REQUIRED COMPONENTS ${comp})\n")
    execute_process(COMMAND ${CMAKE_COMMAND} -S ${probe} -B ${probe}/build -DCMAKE_PREFIX_PATH=${prefix}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(config MATCHES "set\\(Luminal_${comp}_FOUND ON\\)")
      # A backend this build has: the component must be found.
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "find_package(Luminal COMPONENTS ${comp}) failed although ${comp} was built:\n${err}")
      endif()
      continue()
    endif()
    if(rc EQUAL 0)
      message(FATAL_ERROR "find_package(Luminal COMPONENTS ${comp}) succeeded without a ${comp} backend")
    endif()
    if(NOT err MATCHES "built without its ${comp} backend")
      message(FATAL_ERROR "find_package(Luminal COMPONENTS ${comp}) failed without the expected message:\n${err}")
    endif()
  endforeach()
  build_and_run(${WORK_DIR}/build -DCONSUMER_MODE=find_package -DCMAKE_PREFIX_PATH=${prefix}
                -DCMAKE_BUILD_TYPE=Release)
  # The same consumer built by clang (Debian 12's clang 14 has no std::source_location:
  # the public headers must compile there too, luminal/source_location.hpp).
  if(CLANG_CXX)
    set(CXX ${CLANG_CXX})
    build_and_run(${WORK_DIR}/build-clang -DCONSUMER_MODE=find_package -DCMAKE_PREFIX_PATH=${prefix}
                  -DCMAKE_BUILD_TYPE=Release)
  endif()
else()
  # No build type: the consumer's choice, which Luminal must leave alone (the project
  # checks), and the quickest compile of its copy of Luminal (no optimization).
  build_and_run(${WORK_DIR}/build -DCONSUMER_MODE=add_subdirectory -DLUMINAL_SOURCE_DIR=${LUMINAL_SOURCE_DIR}
                -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=)
  if(NOT EXISTS ${WORK_DIR}/build/luminal/libluminal.a)
    message(FATAL_ERROR "consumer (add_subdirectory): BUILD_SHARED_LIBS=OFF did not build libluminal.a")
  endif()
  # The static library, installed and found like the shared one.
  install_luminal(${WORK_DIR}/build ${prefix})
  build_and_run(${WORK_DIR}/static_build -DCONSUMER_MODE=find_package -DCMAKE_PREFIX_PATH=${prefix}
                -DCMAKE_BUILD_TYPE=Release)
endif()

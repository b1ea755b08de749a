# Warning flags shared by every target the project builds, and a helper for the
# project's own executables (tests, examples, benchmarks, tools).
function(luminal_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  endif()
endfunction()

function(luminal_add_executable name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE Luminal::luminal)
  luminal_set_warnings(${name})
endfunction()

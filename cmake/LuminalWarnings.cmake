# Warning flags shared by every target the project builds, and a helper for the
# project's own executables (tests, examples, benchmarks, tools).
function(luminal_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
    # A unity build (CMAKE_UNITY_BUILD, as CI builds) inlines many sources' std::string
    # and std::vector code into one translation unit, and GCC 12 then reports -Wrestrict
    # and -Wfree-nonheap-object inside libstdc++'s own copies (memcpy of 2^63 bytes at
    # offset -3): false positives of its flow analysis. The per-file build keeps both.
    if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-restrict -Wno-free-nonheap-object)
    endif()
  endif()
endfunction()

function(luminal_add_executable name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE Luminal::luminal)
  luminal_set_warnings(${name})
endfunction()

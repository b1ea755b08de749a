# The golden cases' loader, op builders and runner, shared by golden_tests and the CPU
# backend's symbolic-dims run (tests/cpu): compiled once for both.
if(NOT TARGET luminal_golden)
  find_package(nlohmann_json 3 REQUIRED)
  add_library(luminal_golden STATIC ${CMAKE_CURRENT_LIST_DIR}/golden_data.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/golden_ops.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/golden_runner.cpp)
  target_link_libraries(luminal_golden PUBLIC Luminal::luminal PRIVATE nlohmann_json::nlohmann_json)
  target_include_directories(luminal_golden PUBLIC ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/lib)
  luminal_set_warnings(luminal_golden)
endif()

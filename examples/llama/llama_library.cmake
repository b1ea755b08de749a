# The Llama example's library (config, model, session), defined once for the examples and
# for the tests that run it (tests/llama, tests/dist), which also build without examples
# (the sanitizer configuration): each source is compiled once either way.
if(NOT TARGET luminal_llama)
  find_package(nlohmann_json 3 REQUIRED)
  add_library(luminal_llama STATIC ${CMAKE_CURRENT_LIST_DIR}/llama_config.cpp
                                   ${CMAKE_CURRENT_LIST_DIR}/llama_model.cpp)
  target_link_libraries(luminal_llama PUBLIC Luminal::luminal PRIVATE nlohmann_json::nlohmann_json)
  target_include_directories(luminal_llama PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  luminal_set_warnings(luminal_llama)
endif()

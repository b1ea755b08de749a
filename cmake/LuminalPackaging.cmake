# install(EXPORT) + package config + version file, and a build-tree export so that
# find_package against a build directory, add_subdirectory and FetchContent all see the
# same Luminal::luminal target.
include(CMakePackageConfigHelpers)
set(LUMINAL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Luminal)

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/LuminalConfig.cmake.in
  ${PROJECT_BINARY_DIR}/LuminalConfig.cmake
  INSTALL_DESTINATION ${LUMINAL_CMAKE_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/LuminalConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)

export(TARGETS luminal NAMESPACE Luminal:: FILE ${PROJECT_BINARY_DIR}/LuminalTargets.cmake)

if(LUMINAL_INSTALL)
  install(TARGETS luminal EXPORT LuminalTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/luminal
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
  install(EXPORT LuminalTargets NAMESPACE Luminal:: DESTINATION ${LUMINAL_CMAKE_DIR})
  install(FILES ${PROJECT_BINARY_DIR}/LuminalConfig.cmake
                ${PROJECT_BINARY_DIR}/LuminalConfigVersion.cmake
          DESTINATION ${LUMINAL_CMAKE_DIR})
endif()

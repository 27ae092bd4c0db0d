# A namespaced package export: find_package(aether) gives aether::model,
# aether::cpu, aether::cuda (when built) and aether::props_support (when RapidCheck
# and GoogleTest were found), so users link our model and generators into their
# own suites (tests/consumer, docs/using-aether.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_targets aether_api aether_model aether_cpu)
if(AETHER_HAVE_PROPS_SUPPORT)
  list(APPEND _targets aether_props_support aether_props_main)
endif()
if(AETHER_HAVE_CUDA)
  list(APPEND _targets aether_cuda)
endif()
foreach(t IN LISTS _targets)
  string(REPLACE "aether_" "" _export_name ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${_export_name})
endforeach()
install(TARGETS ${_targets} EXPORT aetherTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY api model impl DESTINATION include/aether
        FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY include/aether DESTINATION include FILES_MATCHING PATTERN "*.hpp"
        PATTERN "props.hpp" EXCLUDE)
if(AETHER_HAVE_PROPS_SUPPORT)
  install(FILES include/aether/props.hpp DESTINATION include/aether)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/props/support DESTINATION include/aether/props
          FILES_MATCHING PATTERN "*.hpp")
endif()
install(EXPORT aetherTargets NAMESPACE aether:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/aether)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/aetherConfig.cmake.in
  ${PROJECT_BINARY_DIR}/aetherConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/aether)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/aetherConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/aetherConfig.cmake ${PROJECT_BINARY_DIR}/aetherConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/aether)

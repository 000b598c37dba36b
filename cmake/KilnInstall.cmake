# What `cmake --install` puts in a prefix: the runtime library and its
# headers, KilnConfig.cmake (find_package(Kiln) gives Kiln::runtime), and
# the tools.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(kiln_runtime PROPERTIES EXPORT_NAME runtime)
add_library(Kiln::runtime ALIAS kiln_runtime)
install(TARGETS kiln_runtime EXPORT KilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/kiln/runtime
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/runtime/include/kiln/runtime/Version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/runtime)
install(TARGETS kiln-run kiln-cache RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(KILN_BUILD_COMPILER)
  # They link Debian's libMLIR.so and libLLVM.so where they were found.
  set_target_properties(kiln-compile kiln-tune PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS kiln-compile kiln-tune RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(kiln_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${kiln_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/KilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/KilnConfig.cmake INSTALL_DESTINATION ${kiln_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/KilnConfig.cmake ${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
        DESTINATION ${kiln_cmake_dir})

# cpack -G DEB: one package of everything installed above.
set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VENDOR "The Kiln authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Kiln: a lazy tensor graph compiler (runtime, tools and CMake package)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "kiln@localhost")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# The shared libraries the tools link, found by dpkg-shlibdeps (dpkg-dev);
# then what it cannot see: lld for the cpu target, and the headers and
# libraries a find_package(Kiln) user links (Kiln::runtime is static).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "lld-22, libvulkan-dev, libsqlite3-dev")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)

# SPDX-License-Identifier: Apache-2.0
# package.cmake: the CMake package of deferred_cleanup, in the source tree and
# installed.  Included by the top-level CMakeLists.txt before anything needs
# Python, so `-DDC_PACKAGE_ONLY=ON` configures and installs the package alone.
#
# Targets (the same names in the source tree, as ALIASes, and in the installed
# package, deferred_cleanupConfig.cmake):
#   deferred_cleanup::core     INTERFACE: include/, cxx_std_17, Threads.  The
#                              generic core, header-only; no Python, no CUDA.
#   deferred_cleanup::cpython  INTERFACE: links core; INTERFACE_SOURCES = the
#                              CPython host's sources (src/cpython/*.cpp),
#                              compiled into the consumer's extension, as
#                              nanobind builds its library inside the user's
#                              build.  Those sources alone are compiled with
#                              -fvisibility=hidden (a source-file property, not
#                              an INTERFACE option: the consumer's own sources
#                              keep their visibility), and a consumer target in
#                              a directory without CXX stops the configure
#                              (deferred_cleanupHost.cmake).  The consumer
#                              brings its own Python development target.
#
# Install layout (relative to the install prefix):
#   wheel (scikit-build-core, SKBUILD):  deferred_cleanup/include,
#       deferred_cleanup/src, deferred_cleanup/share/cmake/deferred_cleanup
#       (what deferred_cleanup.get_include() and get_cmake_dir() return);
#   `cmake --install`:  include, share/deferred_cleanup/src,
#       share/cmake/deferred_cleanup.
# The config file finds everything relative to itself, so either tree may be
# moved.
include(CMakePackageConfigHelpers)

# The version is stated once, in pyproject.toml; version.hpp repeats it for
# the preprocessor (tests/test_packaging.py keeps them equal).  Read it there.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../include/deferred_cleanup/version.hpp" _dc_version_line
     REGEX "^#define DEFERRED_CLEANUP_VERSION_STRING \"[0-9.]+\"$")
string(REGEX REPLACE ".*\"([0-9.]+)\"$" "\\1" DC_VERSION "${_dc_version_line}")
if(NOT DC_VERSION MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
  message(FATAL_ERROR "deferred_cleanup: no version in include/deferred_cleanup/version.hpp")
endif()

set(_dc_root "${CMAKE_CURRENT_LIST_DIR}/..")
find_package(Threads REQUIRED)

add_library(deferred_cleanup_core INTERFACE)
target_include_directories(deferred_cleanup_core INTERFACE $<BUILD_INTERFACE:${_dc_root}/include>)
target_compile_features(deferred_cleanup_core INTERFACE cxx_std_17)
target_link_libraries(deferred_cleanup_core INTERFACE Threads::Threads)
add_library(deferred_cleanup::core ALIAS deferred_cleanup_core)

file(GLOB _dc_cpython_sources CONFIGURE_DEPENDS "${_dc_root}/src/cpython/*.cpp")
add_library(deferred_cleanup_cpython INTERFACE)
target_link_libraries(deferred_cleanup_cpython INTERFACE deferred_cleanup_core)
# Absolute paths, no $<BUILD_INTERFACE:...> (the target is never exported; a
# list inside that expression split into broken paths).
target_sources(deferred_cleanup_cpython INTERFACE ${_dc_cpython_sources})
# The host's sources hidden, the consumer's untouched; a consumer without CXX
# stops the configure (deferred_cleanupHost.cmake, shared with the config).
include("${CMAKE_CURRENT_LIST_DIR}/deferred_cleanupHost.cmake")
_deferred_cleanup_host_sources(${_dc_cpython_sources})
add_library(deferred_cleanup::cpython ALIAS deferred_cleanup_cpython)

if(SKBUILD)
  set(DC_INSTALL_INCLUDEDIR deferred_cleanup/include)
  set(DC_INSTALL_SRCDIR deferred_cleanup/src)
  set(DC_INSTALL_CMAKEDIR deferred_cleanup/share/cmake/deferred_cleanup)
else()
  set(DC_INSTALL_INCLUDEDIR include)
  set(DC_INSTALL_SRCDIR share/deferred_cleanup/src)
  set(DC_INSTALL_CMAKEDIR share/cmake/deferred_cleanup)
endif()

# The public headers: the core and the CPython host's (cpython/).  Not the
# comparison policies nor the reference module's driver interface: they are
# this repository's, not an extension's.
install(
  DIRECTORY "${_dc_root}/include/deferred_cleanup"
  DESTINATION "${DC_INSTALL_INCLUDEDIR}"
  FILES_MATCHING
  PATTERN "*.hpp"
  PATTERN "*.h"
  PATTERN "*.pxd"
  PATTERN "comparison" EXCLUDE
  PATTERN "driver.hpp" EXCLUDE)
if(IS_DIRECTORY "${_dc_root}/src/cpython")
  install(
    DIRECTORY "${_dc_root}/src/cpython"
    DESTINATION "${DC_INSTALL_SRCDIR}"
    FILES_MATCHING
    PATTERN "*.cpp"
    PATTERN "*.hpp"
    PATTERN "*.h")
endif()

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/deferred_cleanupConfig.cmake.in"
  "${CMAKE_CURRENT_BINARY_DIR}/deferred_cleanupConfig.cmake"
  INSTALL_DESTINATION "${DC_INSTALL_CMAKEDIR}"
  PATH_VARS DC_INSTALL_INCLUDEDIR DC_INSTALL_SRCDIR)
# Before 1.0 a minor release may change a stable declaration (docs: Stability):
# a request for 0.1 accepts 0.1.x only.
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/deferred_cleanupConfigVersion.cmake"
  VERSION "${DC_VERSION}"
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/deferred_cleanupConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/deferred_cleanupConfigVersion.cmake"
              "${CMAKE_CURRENT_LIST_DIR}/deferred_cleanupHost.cmake"
        DESTINATION "${DC_INSTALL_CMAKEDIR}")

# SPDX-License-Identifier: Apache-2.0
# deferred_cleanupHost.cmake: how the CPython host's sources join a consumer's
# build.  Included by cmake/package.cmake (the source tree's targets) and by
# deferred_cleanupConfig.cmake (the installed package), which it is installed
# beside, so the two behave the same.
#
# deferred_cleanup::cpython carries the host's C++17 sources in
# INTERFACE_SOURCES: they are compiled into every target that links it.  Two
# things follow, both settled here once the whole project is configured (a
# deferred call at the end of the top-level directory, CMake 3.19+
# cmake_language(DEFER)):
#
# * A directory whose project did not enable CXX drops .cpp sources without a
#   word, and the extension then fails at import with an undefined dc_ symbol.
#   So a target that links deferred_cleanup::cpython in such a directory stops
#   the configure with one message: enable CXX.
# * The host's own sources are compiled with -fvisibility=hidden (GCC, Clang),
#   so two extensions that both use the library share no symbol, and the
#   consumer's own sources keep the visibility they had: a source-file
#   property (COMPILE_OPTIONS), set in every directory of the project, since a
#   source file's properties are seen only by targets of the directory that
#   set them.  Not an INTERFACE compile option: that would hide the user's
#   symbols as well.

# The message, in one place.  Arguments: the consumer target and its directory.
function(_deferred_cleanup_cxx_error target dir)
  message(
    FATAL_ERROR
      "deferred_cleanup: target '${target}' (in ${dir}) links deferred_cleanup::cpython, "
      "whose sources are C++17 and are compiled into your target, but CXX is not enabled "
      "there: CMake would drop them and the module would fail at import with an undefined "
      "dc_ symbol.  Enable CXX: project(<name> LANGUAGES C CXX), or enable_language(CXX) "
      "before the target is created.")
endfunction()

# The directories of the project, the top-level one first.
function(_deferred_cleanup_directories out)
  set(todo "${CMAKE_SOURCE_DIR}")
  set(all "")
  while(todo)
    list(POP_FRONT todo d)
    list(APPEND all "${d}")
    get_property(subs DIRECTORY "${d}" PROPERTY SUBDIRECTORIES)
    list(APPEND todo ${subs})
  endwhile()
  set(${out} "${all}" PARENT_SCOPE)
endfunction()

# The deferred check and visibility.  Reads the global property
# DEFERRED_CLEANUP_HOST_SOURCES (absolute paths).
function(_deferred_cleanup_finish_host)
  get_property(sources GLOBAL PROPERTY DEFERRED_CLEANUP_HOST_SOURCES)
  _deferred_cleanup_directories(dirs)
  foreach(d IN LISTS dirs)
    if(sources)
      set_property(
        SOURCE ${sources}
        DIRECTORY "${d}"
        APPEND
        PROPERTY COMPILE_OPTIONS "$<$<CXX_COMPILER_ID:GNU,Clang,AppleClang>:-fvisibility=hidden>")
    endif()
    get_directory_property(cxx DIRECTORY "${d}" DEFINITION CMAKE_CXX_COMPILER_LOADED)
    if(cxx)
      continue()
    endif()
    get_property(targets DIRECTORY "${d}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_property(type TARGET "${t}" PROPERTY TYPE)
      if(type STREQUAL "INTERFACE_LIBRARY")
        continue()  # compiles nothing itself
      endif()
      get_property(links TARGET "${t}" PROPERTY LINK_LIBRARIES)
      if(links MATCHES "deferred_cleanup(::|_)cpython")
        _deferred_cleanup_cxx_error("${t}" "${d}")
      endif()
    endforeach()
  endforeach()
endfunction()

# Called once per configure, by whichever of package.cmake and the config
# comes first.  Argument: the host's sources (absolute paths).
function(_deferred_cleanup_host_sources)
  set_property(GLOBAL APPEND PROPERTY DEFERRED_CLEANUP_HOST_SOURCES ${ARGN})
  get_property(scheduled GLOBAL PROPERTY DEFERRED_CLEANUP_HOST_SCHEDULED)
  if(NOT scheduled)
    set_property(GLOBAL PROPERTY DEFERRED_CLEANUP_HOST_SCHEDULED TRUE)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _deferred_cleanup_finish_host)
  endif()
endfunction()

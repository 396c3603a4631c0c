# One source of sandfence's version: the project version, plus
# `git describe --always --dirty` when configured from a git checkout
# ("0.1.0+g1bbde13-dirty"). Computed at configure time; a tarball, or a
# host without git, gets the project version alone. The CLI, the daemon's
# Health response and every record read it from the generated header
# sandfence/version.h (target sandfence_version).
set(SANDFENCE_VERSION_STRING "${PROJECT_VERSION}")
set(SANDFENCE_GIT_DESCRIBE "")
set(SANDFENCE_GIT_COMMIT "")
set(SANDFENCE_SOURCE_DATE_EPOCH "$ENV{SOURCE_DATE_EPOCH}")
# Each new commit (or a flip of -dirty) changes the header at the next
# configure, and every binary linking the daemon or records relinks (about
# 85 s on two cores); OFF keeps the project version alone for such loops.
option(SANDFENCE_GIT_VERSION "Append git describe to the version" ON)
find_package(Git QUIET)
if(SANDFENCE_GIT_VERSION AND GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(
    COMMAND "${GIT_EXECUTABLE}" describe --always --dirty
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
    OUTPUT_VARIABLE SANDFENCE_GIT_DESCRIBE
    RESULT_VARIABLE _sandfence_git_rc
    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_sandfence_git_rc EQUAL 0 AND SANDFENCE_GIT_DESCRIBE)
    # A bare hash (no tags yet) gets the usual "g" prefix, as describe
    # writes it after a tag.
    if(SANDFENCE_GIT_DESCRIBE MATCHES "^[0-9a-f]+(-dirty)?$")
      set(SANDFENCE_GIT_DESCRIBE "g${SANDFENCE_GIT_DESCRIBE}")
    endif()
    set(SANDFENCE_VERSION_STRING "${PROJECT_VERSION}+${SANDFENCE_GIT_DESCRIBE}")
    # The commit alone, for the daemon's sandfence_build_info metric.
    execute_process(
      COMMAND "${GIT_EXECUTABLE}" rev-parse --short HEAD
      WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
      OUTPUT_VARIABLE SANDFENCE_GIT_COMMIT
      ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    # The commit's time dates generated files (man pages) reproducibly.
    execute_process(
      COMMAND "${GIT_EXECUTABLE}" log -1 --format=%ct
      WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
      OUTPUT_VARIABLE SANDFENCE_SOURCE_DATE_EPOCH
      ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  else()
    set(SANDFENCE_GIT_DESCRIBE "")
  endif()
endif()
message(STATUS "sandfence version: ${SANDFENCE_VERSION_STRING}")

set(SANDFENCE_GENERATED_DIR "${PROJECT_BINARY_DIR}/generated")
configure_file("${CMAKE_CURRENT_LIST_DIR}/version.h.in"
               "${SANDFENCE_GENERATED_DIR}/sandfence/version.h" @ONLY)
add_library(sandfence_version INTERFACE)
target_include_directories(sandfence_version INTERFACE
                           "${SANDFENCE_GENERATED_DIR}")

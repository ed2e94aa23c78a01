# Build helpers. Each folder's sources are globbed (CONFIGURE_DEPENDS), so adding a file needs no
# CMake edit. Each Catch2 test case becomes its own CTest test, labelled with its tags,
# discovered from the built binary (ds_test_dir below, cmake/DsDiscoverTests.cmake).

# ds_library(NAME DIR <dir> [DEPS ...] [EXCLUDE file...] [ONLY file...]): a static library from
# <dir>/*.cc (not recursive; ONLY keeps just the named files). Every library declares the include
# root itself: "core/x.h" style from the source tree, "ds/config.h" from the build tree, and
# include/dsrun once installed. DEPS are PUBLIC: a library's headers may use what it links.
function(ds_library name)
  cmake_parse_arguments(A "" "DIR" "DEPS;EXCLUDE;ONLY" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${A_DIR}/*.cc)
  foreach(ex ${A_EXCLUDE})
    list(FILTER srcs EXCLUDE REGEX ".*/${ex}$")
  endforeach()
  if(A_ONLY)
    list(JOIN A_ONLY "|" only)
    list(FILTER srcs INCLUDE REGEX ".*/(${only})$")
  endif()
  if(NOT srcs)
    # A folder not written yet still yields a real (empty) library, so links stay uniform.
    set(stub ${CMAKE_CURRENT_BINARY_DIR}/${name}_empty.cc)
    file(WRITE ${stub} "// empty: ${A_DIR} has no sources yet\n")
    set(srcs ${stub})
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/dsrun>)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  string(REGEX REPLACE "^ds_" "" export_name ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${export_name})
endfunction()

set(DS_TEST_TAGS unit multirank multiproc e2e mpi gpu optional fault cpu_isa)
# DS_SKIP's exit status (tests/support/skip.h); CTest reports such a test as skipped.
set(DS_TEST_SKIP_CODE 77)
set(DS_DISCOVER_TESTS_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/DsDiscoverTests.cmake)

# ds_test_dir(NAME DIR <dir> [TIMEOUT s] DEPS ...): one Catch2 binary from <dir>/*_test.cc. After
# each link the binary lists its cases and each becomes its own CTest test "NAME: <case>"
# (cmake/DsDiscoverTests.cmake), labelled with its tags among DS_TEST_TAGS ([slow] cases: slow
# only), timeout TIMEOUT (default 600 s; slow 1800 s), skipped on DS_TEST_SKIP_CODE.
function(ds_test_dir name)
  cmake_parse_arguments(A "" "DIR;TIMEOUT" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${A_DIR}/*_test.cc)
  if(NOT srcs)
    return()
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  add_executable(${name} ${srcs})
  target_link_libraries(${name} PRIVATE ds_test_support ${A_DEPS})
  set(ctest_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_tests.cmake)
  string(REPLACE ";" "," labels "${DS_TEST_TAGS}")
  add_custom_command(TARGET ${name} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D TEST_EXECUTABLE=$<TARGET_FILE:${name}> -D TEST_PREFIX=${name}
      -D CTEST_FILE=${ctest_file} -D LABELS=${labels} -D TIMEOUT=${A_TIMEOUT}
      -D SLOW_TIMEOUT=1800 -D SKIP_CODE=${DS_TEST_SKIP_CODE} -P ${DS_DISCOVER_TESTS_SCRIPT}
    BYPRODUCTS ${ctest_file}
    VERBATIM)
  # CTest reads the discovered tests; until the binary is built, one placeholder says so.
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_include.cmake)
  file(WRITE ${include_file}
    "if(EXISTS \"${ctest_file}\")\n"
    "  include(\"${ctest_file}\")\n"
    "else()\n"
    "  add_test(${name}_NOT_BUILT ${name}_NOT_BUILT)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()

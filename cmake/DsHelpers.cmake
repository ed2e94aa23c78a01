# Build helpers. Each folder's sources are globbed (CONFIGURE_DEPENDS), so adding a file needs no
# CMake edit. Test sources are scanned for Catch2 tags; each primary tag becomes a CTest entry
# labelled with that tag (filter "[tag]~[slow]"), and [slow] cases get their own entry.

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

set(DS_TEST_TAGS unit multirank multiproc e2e mpi gpu)

# ds_test_dir(NAME DIR <dir> DEPS ...): one Catch2 binary from <dir>/*_test.cc, registered per tag.
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
  set(found_tags "")
  set(has_slow FALSE)
  foreach(src ${srcs})
    file(READ ${src} text)
    foreach(tag ${DS_TEST_TAGS})
      if(text MATCHES "\\[${tag}\\]")
        list(APPEND found_tags ${tag})
      endif()
    endforeach()
    if(text MATCHES "\\[slow\\]")
      set(has_slow TRUE)
    endif()
  endforeach()
  list(REMOVE_DUPLICATES found_tags)
  foreach(tag ${found_tags})
    add_test(NAME ${name}:${tag} COMMAND ${name} "[${tag}]~[slow]" --order decl)
    set_tests_properties(${name}:${tag} PROPERTIES LABELS ${tag} TIMEOUT ${A_TIMEOUT}
      SKIP_RETURN_CODE 4)
  endforeach()
  if(has_slow)
    add_test(NAME ${name}:slow COMMAND ${name} "[slow]" --order decl)
    set_tests_properties(${name}:slow PROPERTIES LABELS slow TIMEOUT 1800)
  endif()
endfunction()

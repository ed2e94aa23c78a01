# Install rules, the CMake package and the Debian package (docs/install.md is the user's view).
#   cmake --install build --prefix P   bin/dsrun, bin/dsrt; lib/libds_*.a; include/dsrun/<dir>/*.h
#                                      (so "core/x.h" style includes work with -IP/include/dsrun);
#                                      lib/cmake/dsrun/ (find_package(dsrun): dsrun::core, ...);
#                                      share/doc/dsrun/ (README, docs/*.md); share/man/man1/*.1
#   cpack -G DEB (in the build dir)    dsrun_<version>_<arch>.deb, prefix /usr, Depends from
#                                      dpkg-shlibdeps run on dsrun and dsrt
#                                      (cmake/DsCPackProject.cmake.in)
# The launcher's libraries are dsrun's internals and are not installed; the exported libraries
# are the C++ API: core, comm (store, base, backends), zero, runtime (rt_* parts).
include(CMakePackageConfigHelpers)
set(DS_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dsrun)
# Libraries outside the system's default search path (CUDA under /usr/local/cuda) stay findable
# from the installed programs.
set_target_properties(dsrun dsrt PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# Exported: every library defined under core/, comm/, zero/ and runtime/ (subfolders included, so
# a new library there is installed without an edit here), except dsrt's commands (ds_rt_cmd).
function(ds_collect_libraries dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  set(found "")
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type MATCHES "^(STATIC|SHARED|INTERFACE)_LIBRARY$" AND NOT t STREQUAL "ds_rt_cmd")
      list(APPEND found ${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    ds_collect_libraries(${sub} more)
    list(APPEND found ${more})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
set(ds_export_targets "")
foreach(dir core comm zero runtime)
  ds_collect_libraries(${PROJECT_SOURCE_DIR}/${dir} libs)
  list(APPEND ds_export_targets ${libs})
endforeach()

install(TARGETS dsrun dsrt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${ds_export_targets} EXPORT dsrunTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Headers of what is installed: not dsrt's commands, nor a backend this build does not have.
set(ds_header_excludes PATTERN "runtime/cmd" EXCLUDE)
if(NOT DS_HAVE_MPI)
  list(APPEND ds_header_excludes PATTERN "comm/mpi" EXCLUDE)
endif()
if(NOT DS_HAVE_NCCL)
  list(APPEND ds_header_excludes PATTERN "comm/nccl" EXCLUDE)
endif()
foreach(dir core comm zero runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dsrun
    FILES_MATCHING PATTERN "*.h" ${ds_header_excludes})
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/install/ds/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dsrun/ds)

install(EXPORT dsrunTargets NAMESPACE dsrun:: DESTINATION ${DS_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dsrunConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dsrunConfig.cmake INSTALL_DESTINATION ${DS_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dsrunConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dsrunConfig.cmake ${PROJECT_BINARY_DIR}/dsrunConfigVersion.cmake
  DESTINATION ${DS_INSTALL_CMAKEDIR})

file(GLOB ds_docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${ds_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Man pages: help2man (Debian package help2man, scripts/install_deps.sh) turns each program's own
# --help and --version into dsrun.1 and dsrt.1 at build time, so they cannot drift from the code;
# docs/man/<prog>.h2m adds the sections --help does not print, and for dsrt each command's own
# --help becomes a COMMANDS section (cmake/DsManCommands.cmake).
find_program(DS_HELP2MAN help2man)
if(DS_HELP2MAN)
  set(ds_man_dir ${PROJECT_BINARY_DIR}/man)
  set(ds_man_pages ${ds_man_dir}/dsrun.1 ${ds_man_dir}/dsrt.1)
  set(ds_h2m ${PROJECT_SOURCE_DIR}/docs/man)
  set(ds_help2man ${DS_HELP2MAN} --no-info --no-discard-stderr)
  add_custom_command(OUTPUT ${ds_man_dir}/dsrun.1
    COMMAND ${CMAKE_COMMAND} -E make_directory ${ds_man_dir}
    COMMAND ${ds_help2man} --include ${ds_h2m}/dsrun.h2m --output ${ds_man_dir}/dsrun.1
            $<TARGET_FILE:dsrun>
    DEPENDS dsrun ${ds_h2m}/dsrun.h2m COMMENT "help2man: dsrun.1" VERBATIM)
  add_custom_command(OUTPUT ${ds_man_dir}/dsrt.1
    COMMAND ${CMAKE_COMMAND} -E make_directory ${ds_man_dir}
    COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:dsrt> -DBASE=${ds_h2m}/dsrt.h2m
            -DOUT=${ds_man_dir}/dsrt.h2m -P ${PROJECT_SOURCE_DIR}/cmake/DsManCommands.cmake
    COMMAND ${ds_help2man} --include ${ds_man_dir}/dsrt.h2m --output ${ds_man_dir}/dsrt.1
            $<TARGET_FILE:dsrt>
    DEPENDS dsrt ${ds_h2m}/dsrt.h2m ${PROJECT_SOURCE_DIR}/cmake/DsManCommands.cmake
    COMMENT "help2man: dsrt.1" VERBATIM)
  add_custom_target(ds_man ALL DEPENDS ${ds_man_pages})
  install(FILES ${ds_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(WARNING "help2man not found: dsrun.1 and dsrt.1 will not be built or installed "
                  "(scripts/install_deps.sh installs it)")
endif()

# Debian package. Everything in one package (programs, libraries, headers, CMake package, docs).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dsrun)
set(CPACK_PACKAGE_VENDOR dsrun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "DeepSpeed-style distributed training launcher (dsrun) and ZeRO runtime (dsrt)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "dsrun maintainers <dsrun@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# The C++ API (find_package(dsrun)) also needs these at the consumer's build time.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cmake, libfmt-dev, libyaml-cpp-dev, nlohmann-json3-dev, \
libgloo-dev, libopenblas-dev, liburing-dev, libopenmpi-dev")
set(CPACK_STRIP_FILES OFF)  # static libraries keep their debug information
# zstd: about half gzip's packing time here, smaller; Debian 12's dpkg (1.21.18+) reads it.
set(CPACK_DEBIAN_COMPRESSION_TYPE zstd)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/DsCPackProject.cmake
  INPUT ${PROJECT_SOURCE_DIR}/cmake/DsCPackProject.cmake.in)
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/DsCPackProject.cmake)
include(CPack)

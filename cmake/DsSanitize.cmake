# DS_SANITIZE: build everything (libraries, programs, tests) with the named sanitizers, e.g.
# -DDS_SANITIZE=address,undefined or thread. Empty (the default) adds nothing. Applies to C and
# C++ compiles and to every link; nvcc-compiled CUDA code is left alone (configure sanitizer
# builds with -DDS_WITH_CUDA=OFF, as scripts/test.sh --sanitize does). See docs/development.md.
set(DS_SANITIZE "" CACHE STRING
  "Sanitizers to build with: address, undefined, address,undefined, thread (empty: none)")
if(DS_SANITIZE)
  string(REPLACE "," ";" ds_san_list "${DS_SANITIZE}")
  foreach(s ${ds_san_list})
    if(NOT s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "DS_SANITIZE: unknown sanitizer '${s}' in '${DS_SANITIZE}'; "
        "use address, undefined, address,undefined or thread")
    endif()
  endforeach()
  if("thread" IN_LIST ds_san_list AND ("address" IN_LIST ds_san_list OR "leak" IN_LIST ds_san_list))
    message(FATAL_ERROR "DS_SANITIZE: thread cannot be combined with address or leak")
  endif()
  set(ds_san_flags -fsanitize=${DS_SANITIZE} -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12's -Wmaybe-uninitialized misfires on ASan-instrumented code, in <regex> (Catch2, the
    # launcher) among others: https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105616
    list(APPEND ds_san_flags -Wno-maybe-uninitialized)
  endif()
  if("thread" IN_LIST ds_san_list AND TARGET OpenMP::OpenMP_CXX)
    # Debian's libgomp is not built with TSan, so the barrier ending each '#pragma omp parallel'
    # is invisible to it: every parallel loop would report races with the thread that goes on
    # after it, and checking them costs minutes. TSan builds therefore compile the pragmas out
    # (no -fopenmp: loops run in the calling thread, with the same results) and link libgomp
    # only for the omp_* calls; every access is then checked.
    set_property(TARGET OpenMP::OpenMP_CXX PROPERTY INTERFACE_COMPILE_OPTIONS "")
    # (a thread count that only the pragma reads is then an unused variable)
    list(APPEND ds_san_flags -Wno-unknown-pragmas -Wno-unused-variable
      -Wno-unused-but-set-variable)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${ds_san_flags}>")
  add_link_options(-fsanitize=${DS_SANITIZE})
  message(STATUS "dsrun: sanitizers ${DS_SANITIZE}")
endif()

// cuBLASLt, loaded when first called: the entry points our CUDA ops use (cublasLt.h's
// declarations), each forwarding to the function of the same name in libcublasLt, which is
// dlopen'ed on the first call instead of being linked. Why: merely loading libcublasLt 13 costs a
// process about 150 MiB of resident memory (its static initialisers write ~84 MiB of .bss and touch
// ~62 MiB of text), and every dsrt rank of a CPU run paid it from a CUDA-enabled build. Now only a
// process that creates a cuBLASLt handle (device: cuda) loads it.
// Invariants: the library is opened once per process (thread-safe), by soname first (the loader's
// search path: LD_LIBRARY_PATH, the runpath, ld.so.cache), then at the path CMake found at build
// time; a library that cannot be loaded, or lacks one of these symbols, is a NotSupported error
// naming the library, the dlerror text and what to set. Nothing here runs unless a CUDA op is used.
#include <cublasLt.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

#ifndef DS_CUBLASLT_PATH
#define DS_CUBLASLT_PATH ""
#endif

#define DS_LT_STR2(x) #x
#define DS_LT_STR(x) DS_LT_STR2(x)

namespace {

const char* const kSoname = "libcublasLt.so." DS_LT_STR(CUBLAS_VER_MAJOR);

void* openLibrary() {
  static std::once_flag once;
  static void* handle = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return;
    failure = dlerror();
    const std::string builtWith = DS_CUBLASLT_PATH;
    if (!builtWith.empty()) {
      handle = dlopen(builtWith.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) failure += fmt::format("; {}", dlerror());
    }
  });
  if (handle == nullptr) {
    throw ds::NotSupported(fmt::format(
        "cannot load the cuBLASLt library ({}{}{}): {}; CUDA training needs it: add the directory "
        "holding {} (the CUDA toolkit's lib, or the nvidia-cublas wheel's nvidia/cublas/lib) to "
        "LD_LIBRARY_PATH",
        kSoname, *DS_CUBLASLT_PATH != '\0' ? " or " : "", DS_CUBLASLT_PATH, failure, kSoname));
  }
  return handle;
}

// The function `name` of libcublasLt as type Fn (resolved once per entry point by the caller).
template <class Fn>
Fn resolve(const char* name) {
  void* handle = openLibrary();
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    throw ds::NotSupported(fmt::format("{} has no symbol {} (a cuBLASLt older than {}?)", kSoname,
                                       name, CUBLAS_VER_MAJOR));
  }
  return reinterpret_cast<Fn>(symbol);
}

}  // namespace

// Each definition below keeps the exact signature of its declaration in cublasLt.h (the compiler
// checks that: a mismatch would be an overload, refused in extern "C").
#define DS_LT_TARGET(name) static const auto target = resolve<decltype(&name)>(#name)

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) {
  DS_LT_TARGET(cublasLtCreate);
  return target(lightHandle);
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
  DS_LT_TARGET(cublasLtDestroy);
  return target(lightHandle);
}

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  DS_LT_TARGET(cublasLtGetStatusName);
  return target(status);
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  DS_LT_TARGET(cublasLtGetStatusString);
  return target(status);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
    const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
    const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
    size_t workspaceSizeInBytes, cudaStream_t stream) {
  DS_LT_TARGET(cublasLtMatmul);
  return target(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
                workspace, workspaceSizeInBytes, stream);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  DS_LT_TARGET(cublasLtMatrixLayoutCreate);
  return target(matLayout, type, rows, cols, ld);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  DS_LT_TARGET(cublasLtMatrixLayoutDestroy);
  return target(matLayout);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  DS_LT_TARGET(cublasLtMatmulDescCreate);
  return target(matmulDesc, computeType, scaleType);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  DS_LT_TARGET(cublasLtMatmulDescDestroy);
  return target(matmulDesc);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void* buf, size_t sizeInBytes) {
  DS_LT_TARGET(cublasLtMatmulDescSetAttribute);
  return target(matmulDesc, attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  DS_LT_TARGET(cublasLtMatmulPreferenceCreate);
  return target(pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  DS_LT_TARGET(cublasLtMatmulPreferenceDestroy);
  return target(pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
    size_t sizeInBytes) {
  DS_LT_TARGET(cublasLtMatmulPreferenceSetAttribute);
  return target(pref, attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  DS_LT_TARGET(cublasLtMatmulAlgoGetHeuristic);
  return target(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference,
                requestedAlgoCount, heuristicResultsArray, returnAlgoCount);
}

}  // extern "C"

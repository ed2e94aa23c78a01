// runtime/tensor/cuda/cublaslt_loader.cc: libcublasLt is not among the libraries a process loads at
// start (it cost every CPU rank ~150 MiB of resident memory), and is loaded and answers on the
// first cuBLASLt call. Neither needs a GPU: loading the library and its status strings work without
// a device. Builds without CUDA kernels skip both.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include "ds/config.h"
#include "tests/support/skip.h"

#if DS_HAVE_CUDA_KERNELS
#include <cublasLt.h>
#endif

namespace {

// The libraries the dynamic loader maps for this test binary at start (ldd's answer:
// LD_TRACE_LOADED_OBJECTS makes the loader list them and exit without running the program).
std::string startupLibraries() {
  std::array<char, 4096> self{};
  const ssize_t len = readlink("/proc/self/exe", self.data(), self.size() - 1);
  REQUIRE(len > 0);
  const std::string command =
      "LD_TRACE_LOADED_OBJECTS=1 '" + std::string(self.data(), size_t(len)) + "' 2>&1";
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> chunk{};
  size_t got = 0;
  while ((got = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) out.append(chunk.data(), got);
  REQUIRE(pclose(pipe) == 0);
  return out;
}

std::string mappedFiles() {
  std::ifstream maps("/proc/self/maps");
  return {std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("cublaslt loader: libcublasLt is not loaded at process start", "[unit]") {
#if !DS_HAVE_CUDA_KERNELS
  DS_SKIP("built without CUDA kernels");
#else
  const std::string libs = startupLibraries();
  INFO(libs);
  CHECK(libs.find("libcudart") != std::string::npos);  // a CUDA build: the check means something
  CHECK(libs.find("libcublasLt") == std::string::npos);
#endif
}

TEST_CASE("cublaslt loader: the first call loads the library and forwards to it", "[unit]") {
#if !DS_HAVE_CUDA_KERNELS
  DS_SKIP("built without CUDA kernels");
#else
  CHECK(std::string(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)) ==
        "CUBLAS_STATUS_NOT_SUPPORTED");
  CHECK(std::string(cublasLtGetStatusName(CUBLAS_STATUS_SUCCESS)) == "CUBLAS_STATUS_SUCCESS");
  CHECK(mappedFiles().find("libcublasLt") != std::string::npos);
#endif
}

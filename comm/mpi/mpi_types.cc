// dtype/op mapping and 16-bit staging for the mpi backend.
#include "comm/mpi/mpi_types.h"

#include <climits>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace ds::comm::mpi_impl {

bool isHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

MPI_Datatype reduceType(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16: return MPI_FLOAT;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    default: throw NotSupported(fmt::format("mpi backend cannot reduce {} buffers", dtypeName(t)));
  }
}

MPI_Datatype copyType(DType t) {
  switch (dtypeSize(t)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

std::vector<float> widen(const void* src, DType t, size_t n) {
  std::vector<float> out(n);
  auto* s = static_cast<const uint16_t*>(src);
  if (t == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) out[i] = bf16ToFloat(bf16{s[i]});
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = fp16ToFloat(fp16{s[i]});
  }
  return out;
}

void narrow(const float* src, DType t, void* dst, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  if (t == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) d[i] = floatToBf16(src[i]).bits;
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = floatToFp16(src[i]).bits;
  }
}

void finishAvg(void* buf, MPI_Datatype type, size_t n, int size) {
  if (type == MPI_FLOAT) {
    auto* p = static_cast<float*>(buf);
    for (size_t i = 0; i < n; ++i) p[i] /= static_cast<float>(size);
  } else if (type == MPI_INT32_T) {
    auto* p = static_cast<int32_t*>(buf);
    for (size_t i = 0; i < n; ++i) p[i] /= size;
  } else {
    auto* p = static_cast<int64_t*>(buf);
    for (size_t i = 0; i < n; ++i) p[i] /= size;
  }
}

int mpiCount(size_t n, const char* what) {
  if (n > static_cast<size_t>(INT_MAX)) {
    throw ConfigError(
        fmt::format("mpi backend: {} of {} elements exceeds MPI's int count limit", what, n));
  }
  return static_cast<int>(n);
}

}  // namespace ds::comm::mpi_impl

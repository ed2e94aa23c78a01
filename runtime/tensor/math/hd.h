// DS_HD: marks a small inline function callable from host code and from CUDA kernels, so the CPU
// kernels and the .cu kernels share one definition of each per-element formula. Nothing else
// belongs here. Invariant: empty under a plain host compiler, __host__ __device__ under nvcc.
#pragma once

#ifdef __CUDACC__
#define DS_HD __host__ __device__
#else
#define DS_HD
#endif

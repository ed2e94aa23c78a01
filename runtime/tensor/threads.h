// Thread count for the CPU kernels: one OpenMP team runs our loops and splits our GEMMs (sgemm.h);
// OpenBLAS's own pthread pool is held at 1 thread so the two never spin against each other
// (thread_policy.h decides the count). Not a scheduler; process-wide.
#pragma once

#include <string>

namespace ds::runtime {

// Loops with less work than this (elements touched) run on the calling thread: a parallel region
// costs microseconds when threads spin and a scheduler slice when the cores are oversubscribed.
// Results do not change: every parallel loop here splits independent rows or channel chunks.
constexpr long kMinParallelWork = 1L << 15;

// n >= 1: OpenMP's team size; OpenBLAS is set to 1 thread (every call on its calling thread).
void setComputeThreads(int n);
int computeThreads();
std::string blasCoreName();  // openblas_get_corename(), e.g. "Haswell"
int blasThreads();           // openblas_get_num_threads()

}  // namespace ds::runtime

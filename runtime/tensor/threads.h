// Thread count for the CPU kernels: one number for both OpenMP (our loops) and OpenBLAS's own
// pool (its gemms), so "2 threads" means the same for both. Not a scheduler; process-wide.
#pragma once

#include <string>

namespace ds::runtime {

// Loops with less work than this (elements touched) run on the calling thread: a parallel region
// costs microseconds when threads spin and a scheduler slice when the cores are oversubscribed.
// Results do not change: every parallel loop here splits independent rows or channel chunks.
constexpr long kMinParallelWork = 1L << 15;

void setComputeThreads(int n);  // n >= 1
int computeThreads();
std::string blasCoreName();  // openblas_get_corename(), e.g. "Haswell"

}  // namespace ds::runtime

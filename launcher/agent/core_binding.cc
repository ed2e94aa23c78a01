// Core slices per local rank (see core_binding.h).
#include "launcher/agent/core_binding.h"

#include <sched.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::launcher {

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  DS_SYS_CHECK(::sched_getaffinity(0, sizeof(set), &set), "sched_getaffinity");
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<std::vector<int>> coreSlices(const std::vector<int>& cores, int localSize,
                                         const std::string& source) {
  if (localSize <= 0) throw ConfigError(fmt::format("{}: no local ranks to bind", source));
  size_t per = cores.size() / static_cast<size_t>(localSize);
  if (per == 0)
    throw ConfigError(fmt::format(
        "{}: {} core(s) cannot be split among {} local ranks (need at least one core per rank)",
        source, cores.size(), localSize));
  std::vector<std::vector<int>> slices(static_cast<size_t>(localSize));
  for (size_t r = 0; r < slices.size(); ++r)
    slices[r].assign(cores.begin() + static_cast<long>(r * per),
                     cores.begin() + static_cast<long>((r + 1) * per));
  return slices;
}

std::string formatCoreRanges(const std::vector<int>& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", cores[i]) : fmt::format("{}-{}", cores[i], cores[j]);
    i = j + 1;
  }
  return out;
}

void checkCoresAvailable(const std::vector<int>& cores, const std::vector<int>& allowed,
                         const std::string& source, const std::string& host) {
  std::vector<int> missing;
  for (int c : cores)
    if (!std::binary_search(allowed.begin(), allowed.end(), c)) missing.push_back(c);
  if (missing.empty()) return;
  std::sort(missing.begin(), missing.end());
  throw ConfigError(
      fmt::format("{}: core{} {} {} not available on host {} (this process may run on cores {})",
                  source, missing.size() == 1 ? "" : "s", formatCoreRanges(missing),
                  missing.size() == 1 ? "is" : "are", host, formatCoreRanges(allowed)));
}

}  // namespace ds::launcher

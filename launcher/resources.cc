// --include/--exclude/--num_nodes/--num_gpus (see resources.h).
#include "launcher/resources.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace ds::launcher {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

std::string describePool(const Hostfile& pool) {
  return pool.path.empty() ? std::string("(no hostfile: the only host is 'localhost')")
                           : fmt::format("hostfile {}", pool.path);
}

const HostfileEntry& requireHost(const Hostfile& pool, const std::string& host) {
  const HostfileEntry* e = pool.find(host);
  if (!e) {
    if (pool.path.empty())
      throw ConfigError(
          fmt::format("Hostname '{}' not found (no hostfile: the only host is 'localhost')", host));
    throw ConfigError(fmt::format("Hostname '{}' not found in hostfile {}", host, pool.path));
  }
  return *e;
}

void requireSlots(const Hostfile& pool, const HostfileEntry& e, const std::vector<int>& slots) {
  for (int s : slots)
    if (s >= e.slots)
      throw ConfigError(fmt::format("No slot '{}' specified on host '{}' ({} gives it {} slot{})",
                                    s, e.host, describePool(pool), e.slots,
                                    e.slots == 1 ? "" : "s"));
}

std::vector<int> allSlots(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

std::vector<NodeSpec> parseNodeSpecs(const std::string& text, const std::string& flag) {
  std::vector<NodeSpec> specs;
  std::map<std::string, bool> bare;
  for (const std::string& part : split(text, '@')) {
    std::vector<std::string> hs = split(part, ':');
    if (hs.size() > 2 || hs[0].empty() || (hs.size() == 2 && hs[1].empty()))
      throw ConfigError(fmt::format(
          "{}: bad node spec '{}' in '{}' (expected NAME[:SLOT[,SLOT...]] joined by '@')", flag,
          part, text));
    auto it = std::find_if(specs.begin(), specs.end(),
                           [&](const NodeSpec& n) { return n.host == hs[0]; });
    if (it == specs.end()) {
      specs.push_back({hs[0], {}});
      it = specs.end() - 1;
      bare[hs[0]] = false;
    }
    if (hs.size() == 1) {
      bare[hs[0]] = true;
      continue;
    }
    for (const std::string& s : split(hs[1], ',')) {
      if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
        throw ConfigError(fmt::format("{}: bad slot '{}' in '{}' (expected a non-negative integer)",
                                      flag, s, part));
      it->slots.push_back(std::stoi(s));
    }
  }
  for (auto& n : specs) {
    if (bare[n.host]) n.slots.clear();
    std::sort(n.slots.begin(), n.slots.end());
    n.slots.erase(std::unique(n.slots.begin(), n.slots.end()), n.slots.end());
  }
  return specs;
}

std::vector<HostSlots> selectResources(const Hostfile& pool, const ResourceFilter& f) {
  if (!f.include.empty() && !f.exclude.empty())
    throw ConfigError(
        "include_str and exclude_str are mutually exclusive. (--include and --exclude cannot be "
        "combined: list the hosts and slots to use with --include alone)");
  if ((f.numNodes >= 0 || f.numGpus >= 0) && (!f.include.empty() || !f.exclude.empty()))
    throw ConfigError("Cannot specify num_nodes/gpus with include/exclude");
  if (f.numNodes == 0 || f.numNodes < -1)
    throw ConfigError(fmt::format("--num_nodes must be a positive integer, got {}", f.numNodes));
  if (f.numGpus == 0 || f.numGpus < -1)
    throw ConfigError(fmt::format("--num_gpus must be a positive integer, got {}", f.numGpus));

  std::vector<HostSlots> out;
  if (!f.include.empty()) {
    std::vector<NodeSpec> inc = parseNodeSpecs(f.include, "--include");
    for (const auto& n : inc) requireSlots(pool, requireHost(pool, n.host), n.slots);
    for (const auto& e : pool.hosts)
      for (const auto& n : inc)
        if (n.host == e.host)
          out.push_back({e.host, n.slots.empty() ? allSlots(e.slots) : n.slots});
  } else {
    std::vector<NodeSpec> exc;
    if (!f.exclude.empty()) exc = parseNodeSpecs(f.exclude, "--exclude");
    for (const auto& n : exc) requireSlots(pool, requireHost(pool, n.host), n.slots);
    for (const auto& e : pool.hosts) {
      std::vector<int> slots = allSlots(e.slots);
      for (const auto& n : exc) {
        if (n.host != e.host) continue;
        if (n.slots.empty()) slots.clear();
        for (int s : n.slots) slots.erase(std::remove(slots.begin(), slots.end(), s), slots.end());
      }
      out.push_back({e.host, slots});
    }
  }
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const HostSlots& h) { return h.slots.empty(); }),
      out.end());
  if (out.empty())
    throw ConfigError(
        fmt::format("no slots left to run on after --include/--exclude ({})", describePool(pool)));
  if (f.numNodes > 0) {
    if (f.numNodes > static_cast<int>(out.size())) {
      if (pool.path.empty())
        throw ConfigError("Num nodes is >1 but no extra nodes available via hostfile");
      throw ConfigError(fmt::format("--num_nodes {}: {} has only {} usable host{}", f.numNodes,
                                    describePool(pool), out.size(), out.size() == 1 ? "" : "s"));
    }
    out.resize(f.numNodes);
  }
  if (f.numGpus > 0) {
    for (auto& h : out) {
      const HostfileEntry& e = requireHost(pool, h.host);
      if (f.numGpus > e.slots)
        throw ConfigError(fmt::format("--num_gpus {}: host '{}' has only {} slot{} ({})", f.numGpus,
                                      h.host, e.slots, e.slots == 1 ? "" : "s",
                                      describePool(pool)));
      h.slots = allSlots(f.numGpus);
    }
  }
  return out;
}

}  // namespace ds::launcher

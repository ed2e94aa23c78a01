// fuzz-sources: launcher/hostfile.cc launcher/resources.cc
// fuzz-deps: ds_launcher
// Fuzz harness for the hostfile reader and the resource filter: the input is a hostfile's text,
// optionally followed by a NUL and an --include/--exclude spec. Invariants checked: nothing
// crashes; a hostfile that parses has at least one host, every host a valid token with
// slots >= 0 and unique names; a selection keeps hostfile order and only hosts of the file.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "core/error.h"
#include "launcher/hostfile.h"
#include "launcher/resources.h"

using namespace ds::launcher;

namespace {

void checkHostfile(const Hostfile& hf) {
  if (hf.hosts.empty()) std::abort();
  std::set<std::string> seen;
  for (const auto& h : hf.hosts) {
    if (!isValidHostToken(h.host) || h.slots < 0 || h.line < 1) std::abort();
    if (!seen.insert(h.host).second) std::abort();
    if (hf.find(h.host) != &h) std::abort();
  }
}

void select(const Hostfile& hf, const std::string& spec, bool include) {
  ResourceFilter f;
  (include ? f.include : f.exclude) = spec;
  std::vector<HostSlots> got;
  try {
    got = selectResources(hf, f);
  } catch (const ds::ConfigError&) {
    return;
  }
  size_t pos = 0;  // hostfile order: each selected host is found after the previous one
  for (const auto& h : got) {
    while (pos < hf.hosts.size() && hf.hosts[pos].host != h.host) ++pos;
    if (pos == hf.hosts.size()) std::abort();
    ++pos;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string text = all.substr(0, nul);
  Hostfile hf;
  try {
    hf = parseHostfile(text, "fuzz-hostfile");
  } catch (const ds::ConfigError&) {
    return 0;
  }
  checkHostfile(hf);
  if (nul != std::string::npos) {
    const std::string spec = all.substr(nul + 1);
    try {
      parseNodeSpecs(spec, "--include");
    } catch (const ds::ConfigError&) {
    }
    select(hf, spec, true);
    select(hf, spec, false);
  }
  return 0;
}

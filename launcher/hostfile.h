// Hostfile parsing (DESIGN.md §4.1): `host [slots=N] [max_slots=M] [# comment]` per line, the
// DeepSpeed/MPI format, also Kubeflow MPI-Operator and Open MPI files. Not resource selection
// (resources.h). Invariant: hosts keep file order (= node-rank order), no duplicates, no empty
// file; every error names the file, the line number and the line's text.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ds::launcher {

struct HostfileEntry {
  std::string host;  // name, IP, ssh alias or user@host; never starts with '-'
  int slots = 1;     // slots=N, default 1; 0 is accepted and means "no ranks here"
  int maxSlots = 0;  // max_slots=M (informational), 0 when absent
  int line = 0;      // 1-based line number
};

struct Hostfile {
  std::string path;
  std::vector<HostfileEntry> hosts;
  const HostfileEntry* find(const std::string& host) const;
};

constexpr const char* kDefaultHostfile = "/job/hostfile";

// Parses text; `path` only names the source in errors. Throws ConfigError.
Hostfile parseHostfile(const std::string& text, const std::string& path);

// Reads and parses path. A missing file yields nullopt when `isExplicit` is false (the default
// /job/hostfile: a local run) and a ConfigError when the user named it.
std::optional<Hostfile> loadHostfile(const std::string& path, bool isExplicit);

// True when the host token is a valid hostfile host (letters, digits, '.', '_', '-', one
// optional 'user@' prefix; no leading '-').
bool isValidHostToken(const std::string& host);

}  // namespace ds::launcher

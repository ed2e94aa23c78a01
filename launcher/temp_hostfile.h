// The hostfile dsrun writes for mpirun (--launcher openmpi). It lives in a private per-user
// folder, $TMPDIR/dsrun-<uid> (default /tmp/dsrun-<uid>, mode 0700, checked to be a real folder
// of ours), named <dsrun pid>-<job id>.hostfile and created with O_EXCL|O_NOFOLLOW, so that no one
// else can plant or read it; it is removed when the job ends. A SIGKILLed dsrun cannot remove
// its own: the next dsrun removes every hostfile there whose dsrun pid is no longer running.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"

namespace ds::launcher {

// $TMPDIR/dsrun-<euid> ($TMPDIR unset or empty: /tmp). Not created here.
std::string privateTempDir(const EnvMap& env);

// <privateTempDir>/<pid>-<jobId>.hostfile for this process.
std::string tempHostfilePath(const EnvMap& env, const std::string& jobId);

// Removes <pid>-*.hostfile files of ours in `dir` whose pid is not a live process; returns the
// paths removed.
std::vector<std::string> removeStaleHostfiles(const std::string& dir);

class TempHostfile {
 public:
  // Checks or creates path's folder (makePrivateDir), removes stale hostfiles there, then
  // creates `path` (refusing any existing entry) holding `text`. ConfigError/SystemError naming
  // the path on failure.
  TempHostfile(const std::string& path, const std::string& text);
  ~TempHostfile();
  TempHostfile(const TempHostfile&) = delete;
  TempHostfile& operator=(const TempHostfile&) = delete;

 private:
  std::string path_;
};

}  // namespace ds::launcher

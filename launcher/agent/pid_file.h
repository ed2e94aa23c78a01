// PidFile: --save_pid's file holding this process's pid, written on construction and removed on
// destruction (on every exit path, unlike DeepSpeed's, which stays after a normal exit). A
// SIGKILLed agent's file stays; the next agent writing a pid file in that folder removes it.
// Not a lock: several agents on one machine (loopback test hosts) may share the name; the file
// is removed only while it still holds our own pid. The name is predictable (/tmp/<pid>.dsrun), so
// it is written through core/safe_file: a symlink or another user's file there is refused, and
// the text is replaced atomically (temp file + rename), never written through a planted name.
#pragma once

#include <string>
#include <vector>

namespace ds::launcher {

// Removes <digits>.dsrun files of ours in `dir` whose recorded agent pid (a local process) is no
// longer running: those of SIGKILLed agents. Returns the paths removed. Called by PidFile.
std::vector<std::string> removeStalePidFiles(const std::string& dir);

class PidFile {
 public:
  // Empty path: nothing. Throws ConfigError naming the path when a symlink, a non-regular file or
  // another user's file is there; SystemError naming it when it cannot be written.
  explicit PidFile(std::string path);
  ~PidFile();
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;

 private:
  std::string path_;
  std::string content_;
};

}  // namespace ds::launcher

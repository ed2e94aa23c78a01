// Creating files where someone else may have planted a name first (/tmp, a shared nvme_path, a
// checkpoint or log folder): every file dsrun and dsrt create goes through here, so that a
// symbolic link, a FIFO, a directory or a file owned by another user at the name is refused with
// an error naming the path and what is there, instead of being written through. A file of our
// own at the name (a leftover of a killed run whose pid came round again) is replaced.
// Invariant: no function here follows a symbolic link at the final component of a path it
// creates or writes; parent folders are the caller's (a symlinked nvme_path still works).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ds {

// What to do when the name already exists (as a file of ours; anything else is refused).
enum class ExistingFile {
  kRefuse,   // refuse any existing entry (O_EXCL)
  kReplace,  // unlink our own regular file and create afresh
  kAppend,   // open our own regular file as it is (with O_APPEND in flags: append to it)
};

// Opens `path` for writing (flags: O_WRONLY or O_RDWR, plus O_DIRECT, O_APPEND as wanted;
// O_CREAT, O_NOFOLLOW, O_CLOEXEC are added), creating it with `mode`. `what` names the file's
// role for messages ("--save_pid file"). Throws ConfigError "<what> <path>: refusing to write
// through ..." when the name is a symlink, not a regular file, or a file owned by another user;
// SystemError (code() = errno) when the open itself fails. Returns the descriptor.
int createFile(const std::string& path, int flags, mode_t mode, ExistingFile existing,
               const std::string& what);

// Creates folder `path` with mode 0700 if missing (its parent must exist), and checks that it is
// a real folder (not a symlink), owned by us, with no group or other permissions. ConfigError
// naming the path otherwise. For per-user folders in shared places (/tmp/dsrun-<uid>).
void makePrivateDir(const std::string& path, const std::string& what);

// Replaces `path` with `text` atomically: writes <path>.tmp.<pid> (createFile, kReplace), fsyncs
// it and renames it over `path`. An existing `path` that is a symlink, not a regular file or
// another user's is refused first (ConfigError naming it). The temp file is removed on failure.
void writeFileAtomic(const std::string& path, const std::string& text, mode_t mode,
                     const std::string& what);

// The temp name writeFileAtomic and checkpoint writers use for `path` in this process.
std::string tempNameFor(const std::string& path);

// Removes leftovers of killed writers of `path`: entries <path>.tmp.<digits> that are regular
// files of ours (anything else is left alone). Returns the names removed. Only for names that no
// live process is writing (e.g. one writer per name and save).
std::vector<std::string> removeStaleTemps(const std::string& path);

// "a symbolic link to '/etc/passwd'", "a directory", "a regular file owned by uid 65534
// (nobody)", or "" when `path` is a regular file of ours or does not exist.
std::string describeForeignEntry(const std::string& path);

}  // namespace ds

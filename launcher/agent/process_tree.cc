// /proc scan for descendants (see process_tree.h). Raw open/getdents64/read only.
#include "launcher/agent/process_tree.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>

namespace ds::launcher {
namespace {

struct Dirent64 {
  ino64_t ino;
  off64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

// "/proc/<pid>/stat" into buf (no snprintf: nothing that may allocate).
void statPath(const char* pid, char* buf, size_t cap) {
  const char* parts[] = {"/proc/", pid, "/stat"};
  size_t n = 0;
  for (const char* p : parts)
    for (; *p && n + 1 < cap; ++p) buf[n++] = *p;
  buf[n] = '\0';
}

// The ppid field of a /proc/<pid>/stat text ("pid (comm) S ppid ..."); -1 when malformed.
pid_t parsePpid(const char* text, size_t len) {
  size_t close = len;
  for (size_t i = 0; i < len; ++i)
    if (text[i] == ')') close = i;  // comm may hold ')': the last one ends it
  size_t i = close + 1;
  if (i + 3 > len || text[i] != ' ' || text[i + 2] != ' ') return -1;
  i += 3;
  pid_t v = 0;
  bool any = false;
  for (; i < len && text[i] >= '0' && text[i] <= '9'; ++i, any = true) v = v * 10 + (text[i] - '0');
  return any ? v : -1;
}

bool isPid(const char* s) {
  if (!*s) return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

pid_t toPid(const char* s) {
  pid_t v = 0;
  for (; *s; ++s) v = v * 10 + (*s - '0');
  return v;
}

void scanProc(ProcTable* t) {
  t->count = 0;
  int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, t->dents, sizeof(t->dents));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<Dirent64*>(t->dents + off);
      off += d->reclen;
      if (!isPid(d->name) || t->count >= ProcTable::kMax) continue;
      char path[64];
      statPath(d->name, path, sizeof(path));
      int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;  // exited meanwhile
      ssize_t len = ::read(fd, t->stat, sizeof(t->stat));
      ::close(fd);
      if (len <= 0) continue;
      pid_t ppid = parsePpid(t->stat, static_cast<size_t>(len));
      if (ppid < 0) continue;
      t->pid[t->count] = toPid(d->name);
      t->ppid[t->count] = ppid;
      ++t->count;
    }
  }
  ::close(dir);
}

bool contains(const pid_t* a, size_t n, pid_t v) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] == v) return true;
  return false;
}

}  // namespace

size_t findDescendants(const pid_t* roots, size_t nRoots, ProcTable* t, pid_t* out, size_t cap) {
  scanProc(t);
  size_t found = 0;
  for (bool grew = true; grew;) {  // one pass per generation
    grew = false;
    for (size_t i = 0; i < t->count && found < cap; ++i) {
      pid_t p = t->pid[i];
      if (contains(out, found, p) || contains(roots, nRoots, p)) continue;
      if (contains(roots, nRoots, t->ppid[i]) || contains(out, found, t->ppid[i])) {
        out[found++] = p;
        grew = true;
      }
    }
  }
  return found;
}

size_t signalDescendants(pid_t root, int sig) {
  auto table = std::make_unique<ProcTable>();
  auto out = std::make_unique<pid_t[]>(ProcTable::kMax);
  size_t n = findDescendants(&root, 1, table.get(), out.get(), ProcTable::kMax);
  for (size_t i = 0; i < n; ++i) ::kill(out[i], sig);
  return n;
}

}  // namespace ds::launcher

// Helpers of the shm [multiproc] tests (shm_conformance_test.cc, shm_single_copy_test.cc): a
// TcpStore per process, deterministic inputs per rank, and compareOne, which runs one collective
// on the shm group and on a gloo TCP group with the same inputs and reports any byte that
// differs; refuseCma, a seccomp filter that makes this process's CMA calls fail with EPERM.
#pragma once

#include <fmt/format.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/store/tcp_store.h"
#include "core/dtype.h"

namespace ds::test::shm {

using namespace ds;
using namespace ds::comm;

#if defined(__x86_64__)
inline constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
inline constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
inline constexpr uint32_t kAuditArch = 0;
#endif

// Makes this process's process_vm_readv/writev fail with EPERM; "" or why it could not.
inline std::string refuseCma() {
  struct sock_filter prog[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog fprog {
    static_cast<unsigned short>(sizeof(prog) / sizeof(prog[0])), prog
  };
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "PR_SET_NO_NEW_PRIVS failed";
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
    return std::string("seccomp failed: ") + std::strerror(errno);
  }
  return "";
}

inline std::shared_ptr<Store> procStore(int rank, int port) {
  TcpStoreOptions so;
  so.host = "127.0.0.1";
  so.port = port;
  so.isServer = rank == 0;
  so.token = "shm-test-token";
  so.timeout = std::chrono::seconds(60);
  return std::make_shared<TcpStore>(so);
}

inline GroupOptions tcpOptions() {
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  return o;
}

// count elements of dtype t for `rank`: integer-valued when exact, else varied fractions.
inline std::vector<char> input(DType t, size_t count, int rank, bool exact) {
  std::vector<char> out(count * dtypeSize(t));
  std::mt19937 gen(static_cast<unsigned>(1234 + rank * 7919 + count));
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (size_t i = 0; i < count; ++i) {
    float v = exact ? static_cast<float>(static_cast<int>(gen() % 64) - 32) : dist(gen);
    switch (t) {
      case DType::kF32: std::memcpy(out.data() + i * 4, &v, 4); break;
      case DType::kBF16: {
        uint16_t b = floatToBf16(v).bits;
        std::memcpy(out.data() + i * 2, &b, 2);
        break;
      }
      case DType::kF16: {
        uint16_t b = floatToFp16(v).bits;
        std::memcpy(out.data() + i * 2, &b, 2);
        break;
      }
      case DType::kI32: {
        int32_t x = static_cast<int32_t>(v * 1000);
        std::memcpy(out.data() + i * 4, &x, 4);
        break;
      }
      case DType::kI64: {
        int64_t x = static_cast<int64_t>(v * 1000) * (int64_t{1} << 33);
        std::memcpy(out.data() + i * 8, &x, 8);
        break;
      }
      default: break;
    }
  }
  return out;
}

inline BufferView bv(std::vector<char>& v, size_t count, DType t) {
  return {v.empty() ? nullptr : v.data(), count, t, Device::kCpu};
}

inline std::vector<size_t> evenCounts(size_t total, int n) {
  std::vector<size_t> c(static_cast<size_t>(n), total / static_cast<size_t>(n));
  for (size_t i = 0; i < total % static_cast<size_t>(n); ++i) c[i] += 1;
  return c;
}

// Runs one collective on both groups; "" when the outputs are bitwise equal.
inline std::string compareOne(ProcessGroup& shm, ProcessGroup& tcp, const std::string& what,
                              DType t, size_t count, ReduceOp op, bool exact) {
  const int n = shm.size(), r = shm.rank();
  const size_t es = dtypeSize(t);
  std::vector<char> a = input(t, count, r, exact), b = a;
  std::vector<char> oa, ob;
  auto both = [&](auto fn) {
    fn(shm, a, oa)->wait();
    fn(tcp, b, ob)->wait();
  };
  if (what == "allreduce") {
    both([&](ProcessGroup& pg, std::vector<char>& in, std::vector<char>&) {
      return pg.allreduce(bv(in, count, t), op);
    });
  } else if (what == "reduce") {
    both([&](ProcessGroup& pg, std::vector<char>& in, std::vector<char>&) {
      return pg.reduce(bv(in, count, t), n - 1, op);
    });
  } else if (what == "broadcast") {
    both([&](ProcessGroup& pg, std::vector<char>& in, std::vector<char>&) {
      return pg.broadcast(bv(in, count, t), 1 % n);
    });
  } else if (what == "reduce_scatter") {
    auto counts = evenCounts(count, n);
    both([&](ProcessGroup& pg, std::vector<char>& in, std::vector<char>& out) {
      out.assign(counts[static_cast<size_t>(r)] * es, 0);
      return pg.reduceScatter(bv(in, count, t), bv(out, counts[static_cast<size_t>(r)], t), counts,
                              op);
    });
  } else if (what == "allgather") {
    auto counts = evenCounts(count * static_cast<size_t>(n), n);
    std::vector<char> mine = input(t, counts[static_cast<size_t>(r)], r, exact), mine2 = mine;
    oa.assign(count * static_cast<size_t>(n) * es, 0);
    ob = oa;
    shm.allgather(bv(mine, mine.size() / es, t), bv(oa, oa.size() / es, t), counts)->wait();
    tcp.allgather(bv(mine2, mine2.size() / es, t), bv(ob, ob.size() / es, t), counts)->wait();
  } else if (what == "barrier") {
    shm.barrier()->wait();
    tcp.barrier()->wait();
  }
  if (a == b && oa == ob) return "";
  return fmt::format("rank {} of {}: {} {} count {} op {} differs from gloo TCP\n", r, n, what,
                     dtypeName(t), count, reduceOpName(op));
}

}  // namespace ds::test::shm

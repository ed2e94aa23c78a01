// DeviceMirror: a test-only Backend over the nccl backend that accepts host buffers, so the
// host-buffer conformance checks (tests/comm/conformance_check.h: runAll, runHalfAccumulation)
// run unchanged against nccl on device memory. Each collective copies its inputs to fresh device
// buffers, runs, waits, copies the outputs back and returns a completed Work; send/recv return a
// Work that does the wait and the copy back when waited.
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <memory>
#include <numeric>
#include <vector>

#include "comm/backend.h"
#include "core/error.h"

namespace ds::test {

class DeviceMirror final : public comm::Backend {
 public:
  explicit DeviceMirror(std::unique_ptr<comm::Backend> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  bool supports(comm::Device d) const override { return d == comm::Device::kCpu; }

  comm::WorkPtr allreduce(comm::BufferView b, comm::ReduceOp op) override {
    Dev d(b);
    inner_->allreduce(d.view, op)->wait();
    d.back(b);
    return done("allreduce");
  }
  comm::WorkPtr reduceScatter(comm::BufferView in, comm::BufferView out,
                              const std::vector<size_t>& counts, comm::ReduceOp op) override {
    Dev di(in), dout(out);
    inner_->reduceScatter(di.view, dout.view, counts, op)->wait();
    dout.back(out);
    return done("reduce_scatter");
  }
  comm::WorkPtr allgather(comm::BufferView in, comm::BufferView out,
                          const std::vector<size_t>& counts) override {
    Dev di(in), dout(out);
    inner_->allgather(di.view, dout.view, counts)->wait();
    dout.back(out);
    return done("allgather");
  }
  comm::WorkPtr broadcast(comm::BufferView b, int root) override {
    Dev d(b);
    inner_->broadcast(d.view, root)->wait();
    d.back(b);
    return done("broadcast");
  }
  comm::WorkPtr reduce(comm::BufferView b, int root, comm::ReduceOp op) override {
    Dev d(b);
    inner_->reduce(d.view, root, op)->wait();
    d.back(b);
    return done("reduce");
  }
  comm::WorkPtr barrier() override {
    inner_->barrier()->wait();
    return done("barrier");
  }
  // Point-to-point stays asynchronous (a ring posts its recv and send before waiting on either):
  // the device copy lives in the returned Work, which copies back when waited.
  comm::WorkPtr send(comm::BufferView b, int dst, int tag) override {
    auto d = std::make_shared<Dev>(b);
    return std::make_shared<MirrorWork>("send", inner_->send(d->view, dst, tag), d, b, false);
  }
  comm::WorkPtr recv(comm::BufferView b, int src, int tag) override {
    auto d = std::make_shared<Dev>(b);
    return std::make_shared<MirrorWork>("recv", inner_->recv(d->view, src, tag), d, b, true);
  }
  std::unique_ptr<comm::Backend> newSubgroup(const std::vector<int>& ranks) override {
    auto sub = inner_->newSubgroup(ranks);
    if (!sub) return nullptr;
    return std::make_unique<DeviceMirror>(std::move(sub));
  }

 private:
  // A device copy of a host buffer (RAII).
  struct Dev {
    explicit Dev(const comm::BufferView& host) {
      size_t bytes = host.bytes();
      check(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)), "cudaMalloc");
      if (bytes) check(cudaMemcpy(ptr, host.data, bytes, cudaMemcpyHostToDevice), "H2D");
      view = {ptr, host.count, host.dtype, comm::Device::kCuda};
    }
    ~Dev() { cudaFree(ptr); }
    void back(const comm::BufferView& host) const {
      if (host.bytes())
        check(cudaMemcpy(host.data, ptr, host.bytes(), cudaMemcpyDeviceToHost), "D2H");
    }
    static void check(cudaError_t rc, const char* what) {
      if (rc != cudaSuccess) throw Error(fmt::format("{}: {}", what, cudaGetErrorString(rc)));
    }
    void* ptr = nullptr;
    comm::BufferView view;
  };
  comm::WorkPtr done(const char* what) { return comm::completedWork(what); }

  class MirrorWork final : public comm::Work {
   public:
    MirrorWork(const char* what, comm::WorkPtr inner, std::shared_ptr<Dev> dev,
               comm::BufferView host, bool copyBack)
        : Work(what),
          inner_(std::move(inner)),
          dev_(std::move(dev)),
          host_(host),
          copyBack_(copyBack) {}
    void wait(std::chrono::milliseconds timeout) override {
      if (!isCompleted()) {
        try {
          inner_->wait(timeout);
          if (copyBack_) dev_->back(host_);
          markCompleted();
        } catch (...) {
          markFailed(std::current_exception());
        }
      }
      Work::wait(timeout);
    }

   private:
    comm::WorkPtr inner_;
    std::shared_ptr<Dev> dev_;
    comm::BufferView host_;
    bool copyBack_;
  };

  std::unique_ptr<comm::Backend> inner_;
};

}  // namespace ds::test

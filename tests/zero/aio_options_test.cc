// The aio block's settings reach the swap files: block_size is the size of each read/write
// request (a 64 KiB I/O with block_size 4096 is 16 requests), and a queue depth of 2 still moves
// every byte, through io_uring where the kernel allows it and through the pread thread otherwise.
#include <catch2/catch.hpp>

#include <cstring>

#include "tests/support/spawn_ranks.h"
#include "zero/async_file.h"
#include "zero/zero_options.h"

using namespace ds::zero;

TEST_CASE("aio: block_size sets the request size and queue_depth the ring of a swap file",
          "[unit]") {
  ds::test::TempDir dir;
  AioOptions aio;
  aio.blockSize = 4096;
  aio.queueDepth = 2;
  AsyncFile::Options io = asyncFileOptions(aio);
  CHECK(io.maxRequestBytes == 4096);
  CHECK(io.queueDepth == 2);
  for (bool uring : {true, false}) {
    io.allowUring = uring;
    const size_t bytes = 64 * 1024;
    AsyncFile file(dir.file(uring ? "u.swp" : "t.swp"), bytes, io);
    AlignedBuffer out(bytes), in(bytes);
    auto* src = static_cast<unsigned char*>(out.data());
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    file.wait(file.writeAsync(out.data(), bytes, 0));
    file.wait(file.readAsync(in.data(), bytes, 0));
    CHECK(std::memcmp(out.data(), in.data(), bytes) == 0);
    CHECK(file.requestsIssued() == 2 * bytes / 4096);
  }
  // without an aio block: dsrun's defaults
  AsyncFile::Options dflt = asyncFileOptions(AioOptions{});
  CHECK(dflt.maxRequestBytes == kMaxIoRequest);
  CHECK(dflt.queueDepth == 64);
}

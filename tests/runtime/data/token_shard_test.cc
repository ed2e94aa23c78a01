// llm.c token shards on real files: round trip, multi-shard corpus, and every refusal's text.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "runtime/data/token_corpus.h"
#include "runtime/data/token_shard.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {
// A shard written byte by byte here (independently of writeTokenShard).
void rawShard(const std::string& path, int32_t magic, int32_t version, int32_t count,
              const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> h(256, 0);
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(h.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
}
std::string openError(const std::string& path) {
  try {
    TokenShard::open(path);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("shards: llm.c layout round trip", "[unit]") {
  ds::test::TempDir dir;
  std::vector<uint16_t> toks = {1, 2, 3, 65535, 0, 7};
  writeTokenShard(dir.file("a.bin"), toks);
  std::string bytes = ds::test::readFile(dir.file("a.bin"));
  REQUIRE(bytes.size() == 1024 + 12);
  int32_t h[3];
  std::memcpy(h, bytes.data(), 12);
  CHECK(h[0] == 20240520);
  CHECK(h[1] == 1);
  CHECK(h[2] == 6);
  rawShard(dir.file("b.bin"), 20240520, 1, 6, toks);
  CHECK(ds::test::readFile(dir.file("b.bin")) == bytes);
  auto s = TokenShard::open(dir.file("b.bin"));
  REQUIRE(s->size() == 6);
  CHECK(std::vector<uint16_t>(s->tokens(), s->tokens() + 6) == toks);
}

TEST_CASE("shards: bad files are refused naming the file", "[unit]") {
  ds::test::TempDir dir;
  std::string p = dir.file("x.bin");
  rawShard(p, 20240326, 1, 2, {1, 2});
  CHECK(openError(p) == "token shard '" + p +
                            "': bad magic 20240326 (expected 20240520: llm.c uint16 token shard)");
  rawShard(p, 20240520, 2, 2, {1, 2});
  CHECK(openError(p) == "token shard '" + p + "': unsupported version 2 (expected 1)");
  rawShard(p, 20240520, 1, 5, {1, 2});
  CHECK(openError(p) ==
        "token shard '" + p +
            "': truncated (header says 5 tokens = 1034 bytes, file has 1028 bytes)");
  rawShard(p, 20240520, 1, 1, {1, 2});
  CHECK_THAT(openError(p), Contains("trailing bytes after the tokens"));
  ds::test::writeFile(p, "short");
  CHECK(openError(p) == "token shard '" + p +
                            "': truncated header (5 bytes, an llm.c shard starts with 1024 bytes)");
  CHECK_THAT(openError(dir.file("none.bin")), Contains("cannot open"));
  CHECK_THROWS_WITH(TokenCorpus::fromShards(dir.file("nope_*.bin"), 0, "data.shards"),
                    StartsWith("data.shards: no token shard matches '" + dir.file("nope_*.bin") +
                               "' (dsrt prepare-data TEXT PREFIX makes"));
}

TEST_CASE("shards: a corpus spans shards in sorted order; vocab checked", "[unit]") {
  ds::test::TempDir dir;
  writeTokenShard(dir.file("t_001.bin"), {3, 4, 5});
  writeTokenShard(dir.file("t_000.bin"), {0, 1, 2});
  writeTokenShard(dir.file("t_002.bin"), {});
  writeTokenShard(dir.file("t_003.bin"), {6, 7});
  auto c = TokenCorpus::fromShards(dir.file("t_*.bin"), 8, "data.shards");
  REQUIRE(c->size() == 8);
  std::vector<int32_t> out(6);
  c->read(1, 6, out.data());
  CHECK(out == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  CHECK_THROWS_WITH(TokenCorpus::fromShards(dir.file("t_*.bin"), 6, "data.shards"),
                    "token shard '" + dir.file("t_003.bin") +
                        "': token 6 at position 0 is outside the model's vocabulary (6)");
}

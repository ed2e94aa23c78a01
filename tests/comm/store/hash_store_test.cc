// Tests of HashStore and PrefixStore: semantics of every Store method, blocking get/wait with
// timeouts whose messages name the keys, and thread ranks rendezvousing through one instance.
#include "comm/store/hash_store.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "comm/store/prefix_store.h"
#include "core/error.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::comm;
using namespace std::chrono_literals;

namespace {
Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }
}  // namespace

TEST_CASE("HashStore set/get/check/delete/numKeys", "[unit]") {
  HashStore s;
  CHECK(s.numKeys() == 0);
  CHECK_FALSE(s.check({"a"}));
  s.set("a", b("1"));
  s.setString("b", "two");
  CHECK(s.get("a", 1s) == b("1"));
  CHECK(s.getString("b", 1s) == "two");
  CHECK(s.check({"a", "b"}));
  CHECK_FALSE(s.check({"a", "c"}));
  CHECK(s.numKeys() == 2);
  CHECK(s.deleteKey("a"));
  CHECK_FALSE(s.deleteKey("a"));
  CHECK(s.numKeys() == 1);
  s.set("b", b(""));  // empty values are values
  CHECK(s.check({"b"}));
  CHECK(s.get("b", 1s).empty());
}

TEST_CASE("HashStore add is a counter readable as text", "[unit]") {
  HashStore s;
  CHECK(s.add("n", 3) == 3);
  CHECK(s.add("n", -5) == -2);
  CHECK(s.getString("n", 1s) == "-2");
  s.setString("bad", "xyz");
  try {
    s.add("bad", 1);
    FAIL("expected CommError");
  } catch (const ds::CommError& e) {
    CHECK_THAT(e.what(), Catch::Contains("'bad'") && Catch::Contains("xyz"));
  }
}

TEST_CASE("HashStore add refuses a counter that would overflow int64", "[unit]") {
  // Found by store_message_fuzz: a client's delta overflowed the counter (undefined behaviour).
  HashStore s;
  CHECK(s.add("n", INT64_MAX) == INT64_MAX);
  CHECK_THROWS_WITH(s.add("n", 1), Catch::Contains("store add 'n': 9223372036854775807 + 1 "
                                                   "overflows a 64-bit counter"));
  CHECK(s.getString("n", 1s) == "9223372036854775807");  // unchanged
  CHECK(s.add("m", INT64_MIN) == INT64_MIN);
  CHECK_THROWS_AS(s.add("m", -1), ds::CommError);
  CHECK(s.add("m", INT64_MAX) == -1);
}

TEST_CASE("HashStore compareSet", "[unit]") {
  HashStore s;
  CHECK(s.compareSet("k", b(""), b("v1")) == b("v1"));      // absent matches empty expected
  CHECK(s.compareSet("k", b("nope"), b("v2")) == b("v1"));  // mismatch returns current
  CHECK(s.compareSet("k", b("v1"), b("v2")) == b("v2"));
  CHECK(s.compareSet("absent", b("x"), b("y")).empty());  // absent, non-empty expected
  CHECK_FALSE(s.check({"absent"}));
}

TEST_CASE("HashStore get and wait time out naming the missing keys and the time", "[unit]") {
  HashStore s;
  s.set("here", b("1"));
  try {
    s.get("missing", 50ms);
    FAIL("expected TimeoutError");
  } catch (const ds::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("missing") && Catch::Contains("HashStore") &&
                             Catch::Contains(" s "));
  }
  try {
    s.wait({"here", "x", "y"}, 50ms);
    FAIL("expected TimeoutError");
  } catch (const ds::TimeoutError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("x, y"));
    CHECK_THAT(m, !Catch::Contains("here"));
  }
}

TEST_CASE("HashStore get blocks until another thread sets the key", "[unit]") {
  HashStore s;
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    s.setString("late", "v");
  });
  CHECK(s.getString("late", 10s) == "v");
  t.join();
}

TEST_CASE("HashStore rendezvous of thread ranks", "[multirank]") {
  auto store = std::make_shared<HashStore>();
  const int n = 6;
  std::vector<int64_t> seen(n);
  ds::test::runRanks(
      n,
      [&](int r) {
        store->setString("rank/" + std::to_string(r), std::to_string(r));
        seen[r] = store->add("arrived", 1);
        std::vector<std::string> keys;
        for (int i = 0; i < n; ++i) keys.push_back("rank/" + std::to_string(i));
        store->wait(keys, 10s);
      },
      30s);
  std::sort(seen.begin(), seen.end());
  for (int i = 0; i < n; ++i) CHECK(seen[i] == i + 1);
  CHECK(store->getString("arrived", 1s) == std::to_string(n));
}

TEST_CASE("PrefixStore namespaces every key", "[unit]") {
  auto base = std::make_shared<HashStore>();
  PrefixStore a("group0", base), c("group1", base);
  a.setString("k", "A");
  c.setString("k", "C");
  CHECK(a.getString("k", 1s) == "A");
  CHECK(c.getString("k", 1s) == "C");
  CHECK(base->getString("group0/k", 1s) == "A");
  CHECK(a.add("n", 2) == 2);
  CHECK(c.add("n", 5) == 5);
  CHECK(a.check({"k", "n"}));
  CHECK_FALSE(a.check({"zz"}));
  CHECK(a.compareSet("k", Bytes{'A'}, Bytes{'B'}) == Bytes{'B'});
  CHECK(c.getString("k", 1s) == "C");
  CHECK(a.deleteKey("k"));
  CHECK_FALSE(a.check({"k"}));
  CHECK(c.check({"k"}));
  PrefixStore nested("restart1", std::make_shared<PrefixStore>("group0", base));
  nested.setString("x", "1");
  CHECK(base->check({"group0/restart1/x"}));
  try {
    a.wait({"never"}, 30ms);
    FAIL("expected TimeoutError");
  } catch (const ds::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("group0/never"));
  }
}

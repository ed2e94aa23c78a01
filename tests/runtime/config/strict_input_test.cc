// Strict reading of config text on real files (issue 14 item 4): a key given twice in a plan
// YAML or a DeepSpeed JSON file is refused naming both positions; JSON files are parsed as JSON
// (a trailing comma or a YAML-only form is "invalid JSON" with line and column); `--set key=`
// with an empty value is refused; errors in values that came from --set name --set, also for keys
// inside a map given by --set and for the batch triangle; a deepspeed_config that is no regular
// file (a real fifo) is refused instead of blocking.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/config/plan_loader.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;
using ds::test::TempDir;
using ds::test::writeFile;

namespace {

const char* kModel =
    "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32}\n";

std::string loadError(const std::string& path, std::vector<std::string> sets = {}, int world = 1) {
  try {
    loadPlan({path, std::move(sets), world});
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("strict input: a YAML key given twice names both positions", "[unit]") {
  TempDir dir;
  const std::string plan = dir.file("plan.yaml");
  writeFile(plan, std::string(kModel) + "train:\n  steps: 3\n  seed: 1\n  steps: 5\n");
  CHECK(loadError(plan) == plan + ":6:3: key 'steps' given twice (first at 4:3)");
  // Top level, flow maps and maps inside lists too.
  writeFile(plan, std::string(kModel) + "train: {steps: 3}\ntrain: {steps: 4}\n");
  CHECK(loadError(plan) == plan + ":4:1: key 'train' given twice (first at 3:1)");
  writeFile(plan, std::string(kModel) +
                      "deepspeed:\n  optimizer: {type: AdamW, params: {lr: 0.1, lr: 0.2}}\n");
  CHECK(loadError(plan) == plan + ":4:46: key 'lr' given twice (first at 4:37)");
  writeFile(plan, std::string(kModel) + "data:\n  x: [{a: 1, a: 2}]\n");
  CHECK(loadError(plan) == plan + ":4:14: key 'a' given twice (first at 4:8)");
  // A key that is itself a map is refused (before: an exception of the YAML library).
  writeFile(plan, std::string(kModel) + "train:\n  ? {a: 1}\n  : 2\n");
  CHECK(loadError(plan) == plan + ":4:5: keys must be plain names, got a map");
  // The same plan without the duplicate loads.
  writeFile(plan,
            std::string(kModel) + "train:\n  steps: 3\n  seed: 1\ndeepspeed_config: ds.json\n");
  writeFile(dir.file("ds.json"), R"({"train_batch_size": 8})");
  CHECK(loadPlan({plan, {}, 1}).train.steps == 3);
}

TEST_CASE("strict input: a JSON key given twice names both positions", "[unit]") {
  TempDir dir;
  const std::string plan = dir.file("plan.yaml"), js = dir.file("ds.json");
  writeFile(plan, std::string(kModel) + "deepspeed_config: ds.json\n");
  writeFile(js,
            "{\n  \"train_batch_size\": 8,\n  \"zero_optimization\": {\"stage\": 1},\n"
            "  \"train_batch_size\": 16\n}\n");
  CHECK(loadError(plan) == js + ":4:3: key 'train_batch_size' given twice (first at 2:3)");
  writeFile(js, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 1, \"stage\": 2}}");
  CHECK(loadError(plan) == js + ":1:59: key 'stage' given twice (first at 1:47)");
  writeFile(js, "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2}}");
  CHECK(loadPlan({plan, {}, 1}).deepspeed.zero.stage == 2);
}

TEST_CASE("strict input: JSON syntax errors say JSON, with line and column", "[unit]") {
  TempDir dir;
  const std::string plan = dir.file("plan.yaml"), js = dir.file("ds.json");
  writeFile(plan, std::string(kModel) + "deepspeed_config: ds.json\n");
  writeFile(js, "{\n  \"train_batch_size\": 8,\n}\n");  // trailing comma: YAML took it
  CHECK(loadError(plan) == js + ":3:1: invalid JSON: syntax error while parsing object key - "
                                "unexpected '}'; expected string literal");
  writeFile(js, "{\"train_batch_size\": 8 \"x\": 1}");
  CHECK(loadError(plan) == js + ":1:26: invalid JSON: syntax error while parsing object - "
                                "unexpected string literal; expected '}'");
  writeFile(js, "train_batch_size: 8\n");  // YAML in a .json file
  CHECK(loadError(plan) == js + ":1:3: invalid JSON: syntax error while parsing value - invalid "
                                "literal; last read: 'tra'");
  // A number past double's range (found by plan_fuzz: the JSON library's out_of_range escaped).
  writeFile(js, "{\"train_batch_size\": 1e999}");
  CHECK(loadError(plan) == js + ": invalid JSON: number overflow parsing '1e999'");
  writeFile(js, "");
  CHECK_THAT(loadError(plan), Catch::Matchers::StartsWith(js + ":1:1: invalid JSON: "));
  // A plan file named .json is read as JSON too.
  writeFile(dir.file("plan.json"), "{\"model\": {\"gpt\": {\"n_layer\": 1,}}}");
  CHECK_THAT(loadError(dir.file("plan.json")),
             Catch::Matchers::StartsWith(dir.file("plan.json") + ":1:33: invalid JSON: "));
  // A plan YAML's syntax error still says YAML.
  writeFile(plan, std::string(kModel) + "train: {steps: 3\n");
  CHECK_THAT(loadError(plan), Catch::Matchers::StartsWith(plan + ":4:") &&
                                  Catch::Matchers::Contains(": invalid YAML: "));
}

TEST_CASE("strict input: --set with an empty value is an error, null removes a key", "[unit]") {
  TempDir dir;
  const std::string plan = dir.file("plan.yaml");
  writeFile(plan, std::string(kModel) + "train: {steps: 7}\ndeepspeed: {train_batch_size: 8}\n");
  CHECK(loadError(plan, {"train.steps="}) ==
        "--set train.steps=: empty value (give a value; null removes the key so its default "
        "applies)");
  CHECK(loadError(plan, {"train.steps=  "}) ==
        "--set train.steps=  : empty value (give a value; null removes the key so its default "
        "applies)");
  CHECK(loadError(plan, {"model="}) ==
        "--set model=: empty value (give a value; null removes the key so its default applies)");
  // null removes the plan's value: the default applies, as when the key is absent.
  const int64_t dflt = loadPlan({plan, {"train={}"}, 1}).train.steps;
  CHECK(dflt != 7);
  CHECK(loadPlan({plan, {"train.steps=null"}, 1}).train.steps == dflt);
  // A quoted empty string is a value, and a wrong one for an integer.
  CHECK(loadError(plan, {"train.steps=''"}) == "--set train.steps: expected an integer, got ''");
}

TEST_CASE("strict input: bad --set values are reported against --set", "[unit]") {
  TempDir dir;
  const std::string plan = dir.file("plan.yaml");
  writeFile(plan, std::string(kModel) + "deepspeed: {train_batch_size: 8}\n");
  // Keys inside a map given by --set: before, "<file>:1:2: deepspeed.a: unknown key".
  CHECK_THAT(loadError(plan, {"deepspeed={train_batch_size: 8, a: 1}"}),
             Catch::Matchers::StartsWith("--set deepspeed.a: unknown key"));
  CHECK_THAT(loadError("", {"deepspeed={a: 1}"}),
             Catch::Matchers::StartsWith("--set deepspeed.a: unknown key"));
  CHECK(loadError("", {"deepspeed={optimizer: {type: Foo}}"}) ==
        "--set deepspeed.optimizer.type: expected one of Adam, AdamW, SGD, Lamb, OneBitAdam, "
        "ZeroOneAdam, OneBitLamb, got 'Foo'");
  CHECK(loadError("", {"train={steps: x}"}) == "--set train.steps: expected an integer, got 'x'");
  // The batch triangle: a --set value that breaks it names --set, a file's value the file.
  CHECK_THAT(loadError(plan, {"deepspeed.train_batch_size=7"}, 2),
             Catch::Matchers::StartsWith("--set: deepspeed: ") &&
                 Catch::Matchers::EndsWith("(world size 2)"));
  CHECK_THAT(loadError("", {"deepspeed.train_batch_size=7"}, 2),
             Catch::Matchers::StartsWith("--set: deepspeed: "));
  writeFile(plan, std::string(kModel) + "deepspeed: {train_batch_size: 7}\n");
  CHECK_THAT(loadError(plan, {}, 2), Catch::Matchers::StartsWith(plan + ": deepspeed: "));
  // A key given twice inside a --set value.
  CHECK(loadError(plan, {"deepspeed={train_batch_size: 8, train_batch_size: 4}"}) ==
        "--set deepspeed:1:23: key 'train_batch_size' given twice (first at 1:2)");
}

TEST_CASE("strict input: a deepspeed_config that is no regular file is refused", "[unit]") {
  TempDir dir;
  const std::string plan = dir.file("plan.yaml"), fifo = dir.file("ds.json");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // reading it would block for ever
  writeFile(plan, std::string(kModel) + "deepspeed_config: ds.json\n");
  CHECK(loadError(plan) == plan + ": deepspeed_config: '" + fifo + "' is not a regular file");
  writeFile(plan, std::string(kModel) + "deepspeed_config: /dev/zero\n");
  CHECK(loadError(plan) == plan + ": deepspeed_config: '/dev/zero' is not a regular file");
  CHECK(loadError(dir.path()) == "plan: '" + dir.path() + "' is not a regular file");
}

TEST_CASE("strict input: config text that is not UTF-8 is refused with its position", "[unit]") {
  // Found by plan_fuzz: such a byte in a string passed the schema, then writing the resolved
  // config as JSON threw from the JSON library (an "unexpected error" without a position).
  TempDir dir;
  const std::string plan = dir.file("plan.yaml"), js = dir.file("ds.json");
  writeFile(plan, std::string(kModel) + "data:\n  shards: \"/d/caf\xe9_*.bin\"\n");
  CHECK(loadError(plan) == plan + ":4:18: invalid UTF-8 (byte 0xe9); config text must be UTF-8");
  writeFile(plan, std::string(kModel) + "deepspeed_config: ds.json\n");
  writeFile(js, "{\"train_batch_size\": 8, \"x\": \"\xc0\xaf\"}");  // overlong '/'
  CHECK(loadError(plan) == js + ":1:31: invalid UTF-8 (byte 0xc0); config text must be UTF-8");
  CHECK(loadError("", {"train.steps=\xff"}) ==
        "--set:1:13: invalid UTF-8 (byte 0xff); config text must be UTF-8");
  // Real UTF-8 is fine.
  writeFile(js, "{\"train_batch_size\": 8}");
  writeFile(plan, std::string(kModel) + "# caf\xc3\xa9 \xe2\x9c\x93\ndeepspeed_config: ds.json\n");
  CHECK(loadPlan({plan, {}, 1}).deepspeed.trainBatchSize == 8);
}

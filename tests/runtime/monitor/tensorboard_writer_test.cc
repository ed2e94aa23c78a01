// TensorBoard event files: a hand-built expected record byte for byte, and a real file read back.
// (CRC-32C itself is tested in tests/core/crc32c_test.cc.)
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

#include "core/crc32c.h"
#include "runtime/monitor/tensorboard_writer.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;

namespace {
uint32_t maskedCrc32c(const std::string& s) { return ds::maskedCrc32c(s.data(), s.size()); }
std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFF);
  return s;
}
std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(char(x));
  return s;
}
}  // namespace

TEST_CASE("tensorboard: scalar event and record bytes match a hand-built record", "[unit]") {
  // Event{wall_time: 1.5, step: 3, summary{value{tag: "loss", simple_value: 2.0}}}
  std::string value = bytes({0x0A, 0x04}) + "loss" + bytes({0x15, 0x00, 0x00, 0x00, 0x40});
  std::string summary = bytes({0x0A, int(value.size())}) + value;
  std::string event = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F}) + bytes({0x10, 0x03}) +
                      bytes({0x2A, int(summary.size())}) + summary;
  REQUIRE(event.size() == 26);
  CHECK(encodeScalarEvent(1.5, 3, "loss", 2.0f) == event);

  std::string len = bytes({26, 0, 0, 0, 0, 0, 0, 0});
  std::string record = len + le32(maskedCrc32c(len)) + event + le32(maskedCrc32c(event));
  CHECK(tfRecord(event) == record);

  // file_version event, step omitted (proto3 default), multi-byte varint step.
  std::string fv = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x1A, 13}) + "brain.Event:2";
  CHECK(encodeFileVersionEvent(1.0) == fv);
  std::string big = encodeScalarEvent(1.0, 300, "x", 0.f);
  CHECK(big.substr(9, 3) == bytes({0x10, 0xAC, 0x02}));
}

TEST_CASE("tensorboard: event file on disk parses as TFRecords", "[unit]") {
  ds::test::TempDir dir;
  std::string path;
  {
    TensorBoardMonitor tb(MonitorConfig{true, dir.path(), "job"});
    path = tb.path();
    tb.write({{"Train/Samples/train_loss", 2.5, 64}, {"Train/Samples/lr", 1e-3, 64}});
  }
  CHECK(std::filesystem::path(path).parent_path() == std::filesystem::path(dir.path()) / "job");
  CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  std::string f = ds::test::readFile(path);
  size_t pos = 0;
  std::vector<std::string> events;
  while (pos < f.size()) {
    REQUIRE(pos + 12 <= f.size());
    uint64_t n = 0;
    std::memcpy(&n, f.data() + pos, 8);
    uint32_t lenCrc = 0, dataCrc = 0;
    std::memcpy(&lenCrc, f.data() + pos + 8, 4);
    CHECK(lenCrc == maskedCrc32c(f.substr(pos, 8)));
    REQUIRE(pos + 12 + n + 4 <= f.size());
    std::string data = f.substr(pos + 12, n);
    std::memcpy(&dataCrc, f.data() + pos + 12 + n, 4);
    CHECK(dataCrc == maskedCrc32c(data));
    events.push_back(data);
    pos += 12 + n + 4;
  }
  REQUIRE(events.size() == 3);
  CHECK(events[0].find("brain.Event:2") != std::string::npos);
  CHECK(events[1].find("Train/Samples/train_loss") != std::string::npos);
  float v = 0;
  std::memcpy(&v, events[1].data() + events[1].size() - 4, 4);
  CHECK(v == 2.5f);
}

// Known-good bytes from real TensorFlow event files, as quoted in TensorBoard's own tests
// (github.com/tensorflow/tensorboard):
// - tensorboard/data/server/tf_record.rs (commit 2d298a399c5dd4b79922341fc8032ee371d84ba6),
//   test_success: "Event file with tf.summary.scalar("accuracy", 0.99, step=77) dumped via xxd":
//   the file_version record (length 24, length CRC a3 7f 4b 22, data CRC 12 4b 36 ab) and the
//   scalar's record (length 50, length CRC 24 19 56 ec, data CRC a5 5b 64 33);
// - tensorboard/data/server/masked_crc.rs (commit 1c880970dd094c19002f3d79c14127ad0ea29b1a):
//   masked CRC of Event(file_version="CRC test, one two") = 0x5794d08a.
TEST_CASE("tensorboard: records match bytes of real TensorFlow event files", "[unit]") {
  const std::string fvHeader = bytes({0x18, 0, 0, 0, 0, 0, 0, 0, 0xa3, 0x7f, 0x4b, 0x22});
  const std::string fvData =
      bytes({0x09, 0x00, 0x00, 0x80, 0x38, 0x99, 0xd6, 0xd7, 0x41, 0x1a, 0x0d}) + "brain.Event:2";
  const std::string fvFooter = bytes({0x12, 0x4b, 0x36, 0xab});
  REQUIRE(fvData.size() == 24);
  double wall = 0;
  std::memcpy(&wall, fvData.data() + 1, 8);
  CHECK(encodeFileVersionEvent(wall) == fvData);  // our event encoding, same wall time
  CHECK(tfRecord(fvData) == fvHeader + fvData + fvFooter);

  const std::string scalarData = bytes({0x09, 0xc4, 0x05, 0xb7, 0x3d, 0x99, 0xd6, 0xd7, 0x41, 0x10,
                                        0x4d, 0x2a, 0x25, 0x0a, 0x23, 0x0a, 0x08}) +
                                 "accuracy" +
                                 bytes({0x42, 0x0a, 0x08, 0x01, 0x12, 0x00, 0x22, 0x04, 0xa4, 0x70,
                                        0x7d, 0x3f, 0x4a, 0x0b, 0x0a, 0x09, 0x0a, 0x07}) +
                                 "scalars";
  REQUIRE(scalarData.size() == 50);
  CHECK(tfRecord(scalarData) == bytes({0x32, 0, 0, 0, 0, 0, 0, 0, 0x24, 0x19, 0x56, 0xec}) +
                                    scalarData + bytes({0xa5, 0x5b, 0x64, 0x33}));

  const std::string crcTest = bytes({0x1a, 0x11}) + "CRC test, one two";
  CHECK(ds::maskedCrc32c(crcTest.data(), crcTest.size()) == 0x5794d08au);
}

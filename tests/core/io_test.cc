// JSON input limits and the output writer: deep nesting, numbers beyond double and
// wrongly typed fields are errors naming the input; outputs write through devices,
// FIFOs and symlinks and replace only regular files.
#include "core/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "core/machine.h"
#include "tests/support/error_of.h"
#include "tests/support/scratch.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

using testing::error_of;

using testing::scratch_dir;
using testing::slurp;

TEST(ParseJson, NestingDeeperThanTheLimitIsAnErrorNotAStackOverflow) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_NE(error_of([&] { (void)parse_json(deep, "deep.json"); }).find("deep.json: JSON nested deeper than 256"),
            std::string::npos);
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 100'000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100'000, '}');
  }();
  EXPECT_NE(error_of([&] { (void)parse_json(objects, "o.json"); }).find("nested deeper"), std::string::npos);
  // Unterminated, so malformed as well as deep: still the depth error, no crash.
  EXPECT_NE(error_of([&] { (void)parse_json(std::string(100'000, '['), "t.json"); }).find("t.json"), std::string::npos);
  // Brackets inside strings do not count; the limit itself parses.
  EXPECT_NO_THROW((void)parse_json(R"({"s": "[[[[[[[[[[[[[[[[[[[[[[[["})", "s.json"));
  EXPECT_NO_THROW((void)parse_json(std::string(256, '[') + std::string(256, ']'), "ok.json"));
}

TEST(ParseJson, ANumberBeyondDoubleIsAnErrorNamingTheFile) {
  EXPECT_NE(error_of([] { (void)parse_json(R"({"devices": 1e400})", "m.json"); })
                .find("m.json: number overflow parsing '1e400' at byte 12 (field \"devices\")"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)parse_json("[1, -1e999]", "a.json"); }).find("a.json: number overflow parsing '-1e999' at byte 4"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)parse_json(R"({"a": [1, 2)", "x.json"); }).find("x.json: malformed JSON at byte"),
            std::string::npos);
}

TEST(ParseJson, ErrorMessagesDescribeDeepValuesWithoutRecursing) {
  // A value nested 200 deep inside a field of the wrong type: the message describes it
  // by its size (the old message printed it with dump(), recursively).
  const std::string text = R"({"nodes": [{"name": "x", "kind": "input", "shape": )" + std::string(200, '[') +
                           std::string(200, ']') + "}]}";
  EXPECT_NE(error_of([&] { (void)graph_from_json(parse_json(text, "g.json"), "g.json"); })
                .find("expected integer sizes, got an array of 1 element(s)"),
            std::string::npos);
  EXPECT_EQ(json_read::describe(nlohmann::json::parse(R"({"a": [1]})")), "an object with 1 field(s)");
  EXPECT_EQ(json_read::describe(nlohmann::json::parse("[1, [2]]")), "an array of 2 element(s)");
  EXPECT_EQ(json_read::describe(nlohmann::json::parse("[1, 2]")), "[1,2]");
  EXPECT_EQ(json_read::describe(std::string(100, 'a')), "\"" + std::string(60, 'a') + "\"...");
}

TEST(ParseJson, WronglyTypedFieldsAreErrorsNamingTheField) {
  auto graph = [](const std::string& node) {
    return error_of([&] {
      (void)graph_from_json(nlohmann::json::parse(R"({"nodes": [{"name": "x", "kind": "input", "shape": [2, 3]},)" +
                                                  node + "]}"),
                            "g.json");
    });
  };
  EXPECT_NE(graph(R"({"name": "f", "kind": "fill", "shape": [2], "fill": 7})").find("node 1 ('f'): fill: expected a string, got 7"),
            std::string::npos);
  EXPECT_NE(graph(R"({"name": "y", "kind": "einsum", "inputs": ["x"], "einsum": "ij->i", "agg": 3})")
                .find("node 1 ('y'): agg: expected a string, got 3"),
            std::string::npos);
  EXPECT_NE(graph(R"({"name": "y", "kind": "einsum", "inputs": ["x"], "einsum": "ij->i", "dtype": [1]})")
                .find("node 1 ('y'): dtype: expected a string, got [1]"),
            std::string::npos);
  EXPECT_NE(graph(R"({"name": "y", "kind": "einsum", "inputs": ["x"], "einsum": 5})").find("einsum: expected a string"),
            std::string::npos);
  const Graph g = graph_from_json(
      nlohmann::json::parse(R"({"nodes": [{"name": "x", "kind": "input", "shape": [4]}]})"), "g.json");
  auto decomposition = [&](const std::string& text) {
    return error_of([&] { (void)decomposition_from_json(nlohmann::json::parse(text), g, "d.json"); });
  };
  EXPECT_NE(decomposition(R"({"devices": 1e20})").find("d.json: devices: "), std::string::npos);
  EXPECT_NE(decomposition(R"({"devices": 2147483647})").find("must be in [1, 65536]"), std::string::npos);
  EXPECT_NE(decomposition(R"({"devices": 2, "nodes": [{"name": "x", "parts": [1e10]}]})").find("parts"),
            std::string::npos);
  EXPECT_NE(decomposition(R"({"devices": 2, "nodes": [{"name": "x", "parts": "2"}]})")
                .find("expected an array of integers"),
            std::string::npos);
}

TEST(ParseJson, IdsOutsideInt32AreErrorsNotTruncated) {
  nlohmann::json m = to_json(machine_preset("cpu:2"));
  m["devices"][0]["host"] = 4294967296;  // truncated to 0, it read as a valid host
  EXPECT_NE(error_of([&] { (void)machine_from_json(m, "m.json"); }).find("m.json.devices[0].host: 4294967296 is not an id"),
            std::string::npos);
}

TEST(WriteFile, ARegularFileIsReplacedAtomically) {
  fs::path d = scratch_dir("tessel_write_regular");
  fs::path p = d / "out.json";
  write_file_atomic(p.string(), "one");
  write_file_atomic(p.string(), "two");
  EXPECT_EQ(slurp(p), "two");
  EXPECT_FALSE(fs::exists(d / "out.json.tmp-tessel"));
  fs::remove_all(d);
}

TEST(WriteFile, ASymlinkIsWrittenThroughAndStaysALink) {
  fs::path d = scratch_dir("tessel_write_symlink");
  fs::path target = d / "target.json", link = d / "link.json";
  write_file_atomic(target.string(), "old");
  fs::create_symlink(target, link);
  write_file_atomic(link.string(), "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(target), "new");
  // A dangling link: its target is created.
  fs::path dangling = d / "dangling.json", missing = d / "missing.json";
  fs::create_symlink(missing, dangling);
  write_file_atomic(dangling.string(), "made");
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(slurp(missing), "made");
  fs::remove_all(d);
}

TEST(WriteFile, ADeviceIsWrittenNotReplacedAndAFullOneIsAnError) {
  ASSERT_TRUE(fs::exists("/dev/null"));
  write_file_atomic("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  EXPECT_NE(error_of([] { write_file_atomic("/dev/full", "x"); }).find("/dev/full: write failed"), std::string::npos);
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  EXPECT_FALSE(fs::exists("/dev/full.tmp-tessel"));
}

TEST(WriteFile, AFifoIsWrittenThrough) {
  fs::path d = scratch_dir("tessel_write_fifo");
  fs::path fifo = d / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  write_file_atomic(fifo.string(), "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  fs::remove_all(d);
}

TEST(WriteFile, ADirectoryOrAMissingFolderIsAnErrorNamingThePath) {
  fs::path d = scratch_dir("tessel_write_dir");
  EXPECT_NE(error_of([&] { write_file_atomic(d.string(), "x"); }).find("is a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { write_file_atomic((d / "no" / "f.json").string(), "x"); }).find("cannot open for writing"),
            std::string::npos);
  fs::remove_all(d);
}

// check_can_write: the same errors as the write, before it, and nothing left behind.
TEST(WriteFile, CheckCanWriteFailsWhereTheWriteWouldAndWritesNothing) {
  fs::path d = scratch_dir("tessel_check_write");
  check_can_write((d / "new.json").string());
  EXPECT_FALSE(fs::exists(d / "new.json"));
  EXPECT_FALSE(fs::exists(d / "new.json.tmp-tessel"));
  write_file_atomic((d / "old.json").string(), "kept");
  check_can_write((d / "old.json").string());
  EXPECT_EQ(slurp(d / "old.json"), "kept");
  check_can_write("-");
  check_can_write("/dev/null");
  EXPECT_NE(error_of([&] { check_can_write(d.string()); }).find(d.string() + ": is a directory"), std::string::npos);
  const std::string missing = (d / "no" / "f.json").string();
  EXPECT_NE(error_of([&] { check_can_write(missing); }).find(missing + ": cannot open for writing"), std::string::npos);
  EXPECT_NE(error_of([] { check_can_write(""); }).find("output path is empty"), std::string::npos);
  fs::remove_all(d);
}

}  // namespace
}  // namespace tessel

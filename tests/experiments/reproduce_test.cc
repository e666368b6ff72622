// tessel reproduce at reduced sizes: every implemented reproduction writes its CSV with
// one row per point and prints its headline; unknown and unimplemented names say so.
#include "experiments/reproduce.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/support/cli.h"

namespace tessel::experiments {
namespace {

using testing::run_tessel;
using testing::temp_path;

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) rows.push_back(parse_csv_line(line, path));
  return rows;
}

class Reproduce : public ::testing::TestWithParam<std::string> {};

TEST_P(Reproduce, WritesOneRowPerPointAndAHeadlineAtReducedSize) {
  auto dir = temp_path("tessel_reproduce_" + GetParam());
  std::filesystem::remove_all(dir);
  ReproduceOptions o;
  o.dir = dir.string();
  o.quick = true;
  o.jobs = 2;
  o.plot = false;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  o.out = devnull;
  ReproduceResult r = reproduce(GetParam(), o);
  std::fclose(devnull);
  EXPECT_EQ(r.failed, 0u);
  auto rows = read_csv(r.csv);
  ASSERT_EQ(rows.size(), r.points + 1);  // header + one row per point
  const auto& header = rows[0];
  // Simulated reproductions report makespan_s; sim-vs-measured reports simulated_s.
  auto makespan = std::find(header.begin(), header.end(), "makespan_s") - header.begin();
  if (static_cast<std::size_t>(makespan) == header.size())
    makespan = std::find(header.begin(), header.end(), "simulated_s") - header.begin();
  ASSERT_LT(static_cast<std::size_t>(makespan), header.size());
  const bool has_error = header.back() == "error";
  for (std::size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), header.size());
    EXPECT_GT(std::stod(rows[i][static_cast<std::size_t>(makespan)]), 0);
    if (has_error) {
      EXPECT_EQ(rows[i].back(), "");
    }
  }
  EXPECT_GE(r.headlines.size(), 2u);  // at least one figure and the csv line
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Implemented, Reproduce,
                         ::testing::Values("einsummable-chain", "eindecomp-llama", "work-conserving", "scaling", "video-chain", "sim-vs-measured",
                                           "fused-collective", "overlap-priority", "offload"));

TEST(ReproduceNames, UnknownAndUnimplementedNamesAreErrorsListingTheImplementedOnes) {
  ReproduceOptions o;
  o.plot = false;
  try {
    (void)reproduce("no-such", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown reproduction 'no-such'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("work-conserving"), std::string::npos);
  }
  for (const auto& r : reproductions()) {  // every one not implemented yet says why
    if (r.implemented) continue;
    try {
      (void)reproduce(r.name, o);
      FAIL() << r.name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + r.name + "' is not implemented: waits"), std::string::npos) << e.what();
    }
  }
}

TEST(ReproduceCli, WorkConservingWritesCsvAndPngAndComparesWithDoppler) {
  auto dir = temp_path("tessel_reproduce_cli");
  std::filesystem::remove_all(dir);
  auto r = run_tessel("reproduce work-conserving --quick -o " + dir.string());
  if (r.status != 0 && r.err.find("drawing") != std::string::npos) GTEST_SKIP() << "no Python with matplotlib: " << r.err;
  ASSERT_EQ(r.status, 0) << r.output();
  EXPECT_NE(r.out.find("DOPPLER"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1.333"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "work-conserving.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "work-conserving.png"));
  EXPECT_GT(std::filesystem::file_size(dir / "work-conserving.png"), 1000u);
  std::filesystem::remove_all(dir);
}

// --workload: offload caps the workload given (every row names it); other reproductions
// refuse the option rather than ignore it.
TEST(ReproduceCli, OffloadCapsTheWorkloadGiven) {
  auto dir = temp_path("tessel_reproduce_workload");
  std::filesystem::remove_all(dir);
  const std::string spec = "llama-block:model=7b,seq=32";
  auto r = run_tessel("reproduce offload --no-plot --workload " + spec + " -o " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output();
  const auto rows = read_csv((dir / "offload.csv").string());
  std::filesystem::remove_all(dir);
  ASSERT_GT(rows.size(), 1u);
  const auto col = std::find(rows[0].begin(), rows[0].end(), "workload") - rows[0].begin();
  ASSERT_LT(static_cast<std::size_t>(col), rows[0].size());
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i][static_cast<std::size_t>(col)], spec) << i;
  // Beside its numbers: issue 16's target, judged per capped row (at 50% and above), and
  // the nearest published figure for the fixed-order baseline, named as not like-for-like.
  auto at = [&](const char* name) {
    const auto c = std::find(rows[0].begin(), rows[0].end(), name) - rows[0].begin();
    EXPECT_LT(static_cast<std::size_t>(c), rows[0].size()) << name;
    return static_cast<std::size_t>(c);
  };
  const std::size_t system = at("system"), pct = at("cap_pct"), slowdown = at("slowdown"),
                    target = at("target_max_slowdown"), meets = at("meets_target");
  int judged = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    if (row[system] == "uncapped" || std::stoi(row[pct]) < 50) {
      EXPECT_EQ(row[meets], "") << i;
      continue;
    }
    EXPECT_EQ(row[target], "1.25") << i;
    EXPECT_EQ(row[meets], !row[slowdown].empty() && std::stod(row[slowdown]) <= 1.25 ? "yes" : "no") << i;
    ++judged;
  }
  EXPECT_EQ(judged, 6);  // 100%, 75%, 50% × free and fixed order
  EXPECT_NE(r.out.find("target <= 1.25x uncapped (issue 16): free order "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Twin-Flow"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not a like-for-like figure"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no figure recorded"), std::string::npos) << r.out;
  auto other = run_tessel("reproduce scaling --quick --no-plot --workload " + spec + " -o " + dir.string());
  EXPECT_EQ(other.status, 1) << other.output();
  EXPECT_NE(other.err.find("--workload applies to offload only"), std::string::npos) << other.output();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace tessel::experiments

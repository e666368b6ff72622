#pragma once
// Results files of `tessel sweep` in tests: reading them by column name, and a fixture
// with a fresh results path and a silent log.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "experiments/sweep.h"
#include "tests/support/cli.h"

namespace tessel::testing {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The index of the column named `name` (the keys before the figures may grow).
inline std::size_t sweep_col(const std::string& name) {
  const auto& c = experiments::sweep_columns();
  const auto it = std::find(c.begin(), c.end(), name);
  EXPECT_NE(it, c.end()) << name;
  return static_cast<std::size_t>(it - c.begin());
}

// Data rows of a results file (header dropped), each split.
inline std::vector<std::vector<std::string>> sweep_rows(const std::filesystem::path& p) {
  std::istringstream in(read_text(p));
  std::string line;
  std::getline(in, line);
  std::vector<std::vector<std::string>> out;
  while (std::getline(in, line)) out.push_back(experiments::parse_csv_line(line, p.string()));
  return out;
}

// A results path removed before and after each test, and options writing to /dev/null.
class SweepFile : public ::testing::Test {
 protected:
  void SetUp() override {
    csv_ = temp_path("tessel_sweep.csv");
    std::filesystem::remove(csv_);
  }
  void TearDown() override { std::filesystem::remove(csv_); }
  ~SweepFile() override { std::fclose(log_); }
  experiments::SweepOptions options(int jobs) {
    experiments::SweepOptions o;
    o.jobs = jobs;
    o.log = log_;
    return o;
  }
  std::filesystem::path csv_;
  std::FILE* log_ = std::fopen("/dev/null", "w");
};

}  // namespace tessel::testing

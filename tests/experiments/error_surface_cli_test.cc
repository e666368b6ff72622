// The CLI's error promise on hostile input: every failure prints `tessel: error: ...`
// and exits with its documented code (1 input, 2 command line, 3 resources), requests
// beyond the limits are refused before any work, and no file is left behind.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "runtime/npy.h"
#include "tests/support/cli.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;
using testing::run_tessel;
using testing::temp_path;

void expect_error(const testing::CliResult& r, int code, const std::string& needle, const std::string& label) {
  EXPECT_EQ(r.status, code) << label << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("tessel: error: ", 0), 0u) << label << ": stderr is\n" << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << label << ": stderr is\n" << r.err << "\nexpected: " << needle;
}

TEST(ErrorSurfaceCli, CommandLineErrorsCarryThePrefixAndExitCode2) {
  expect_error(run_tessel("lower --no-such-option"), 2, "--no-such-option", "unknown option");
  expect_error(run_tessel("plan -w chain -d abc -s eindecomp"), 2, "abc", "non-numeric -d");
  expect_error(run_tessel("nosuchcommand"), 2, "subcommand", "unknown command");
  expect_error(run_tessel("simulate -w chain -d 4"), 2, "--machine", "missing required option");
  // --help is no error.
  auto help = run_tessel("plan --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--devices"), std::string::npos);
}

TEST(ErrorSurfaceCli, AHugeDeviceCountIsRefusedBeforeAnyWork) {
  auto t0 = std::chrono::steady_clock::now();
  expect_error(run_tessel("plan -w chain -d 2147483647 -s eindecomp"), 2, "not in range 1 to 65536", "plan -d");
  expect_error(run_tessel("simulate -w chain -d 2147483647 -m cpu"), 2, "65536", "simulate -d");
  expect_error(run_tessel("lower -w chain -d 0"), 2, "0", "lower -d 0");
  // Within the maximum but beyond the machine: refused before planning.
  expect_error(run_tessel("simulate -w chain -d 65536 -s eindecomp -m h100-sxm-8"), 1,
               "-d: 65536 devices asked for, but machine 'h100-sxm-8' has only 8", "simulate -d > machine");
  expect_error(run_tessel("simulate -w chain -d 4 -m cpu:99999999"), 1, "must be in [1, 65536]", "cpu:99999999");
  expect_error(run_tessel("simulate -w chain -d 4 -m cluster:100000xh100-sxm-8"), 1, "exceed the maximum of 65536",
               "cluster of 800,000 devices");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

TEST(ErrorSurfaceCli, SimulationAt8192DevicesStillRuns) {
  auto r = run_tessel("simulate -w chain:size=8192 -d 8192 -m cluster:1024xh100-sxm-8 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["makespan_s"].get<double>(), 0);
}

TEST(ErrorSurfaceCli, OverflowingSizesAndTheClockLimitAreErrorsNamingThem) {
  expect_error(run_tessel("lower -w chain:size=2147483648 -d 2"), 1, "overflows 64-bit integers", "chain 2^31");
  expect_error(run_tessel("plan -w chain:size=4611686018427387904 -d 2 -s eindecomp"), 1, "overflows 64-bit integers",
               "chain 2^62");
  expect_error(run_tessel("simulate -w chain:size=1000000 -d 1 -m cpu"), 1, "clock limit", "a run of 266 days");
}

TEST(ErrorSurfaceCli, WriteMachineWritesNothingWhenTheCommandFails) {
  const std::string m = temp_path("tessel_wm.json").string();
  fs::remove(m);
  expect_error(run_tessel("simulate -w chain -d 16 -m h100-sxm-8 --write-machine " + m), 1, "has only 8", "-d 16 on 8");
  EXPECT_FALSE(fs::exists(m));
  expect_error(run_tessel("simulate -w nosuch -d 2 -m h100-sxm-8 --write-machine " + m), 1, "nosuch", "bad workload");
  EXPECT_FALSE(fs::exists(m));
  auto ok = run_tessel("simulate -w chain -d 2 -m h100-sxm-8 --write-machine " + m);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_TRUE(fs::exists(m));
  fs::remove(m);
}

TEST(ErrorSurfaceCli, OutputsWriteThroughDevicesAndSymlinksAndDashIsStdout) {
  if (fs::exists("/dev/full")) {
    expect_error(run_tessel("plan -w chain -d 2 -s eindecomp -o /dev/full"), 1, "/dev/full: write failed", "/dev/full");
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
  }
  const fs::path target = temp_path("tessel_link_target.json"), link = temp_path("tessel_link.json");
  fs::remove(target);
  fs::remove(link);
  { std::ofstream(target) << "old"; }
  fs::create_symlink(target, link);
  auto r = run_tessel("plan -w chain -d 2 -s eindecomp -o " + link.string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  std::ifstream in(target);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(nlohmann::json::parse(ss.str())["devices"], 2);
  fs::remove(link);
  fs::remove(target);
  // -o -: the decomposition alone on stdout, and it lowers again.
  auto dash = run_tessel("plan -w chain -d 2 -s eindecomp -o -");
  ASSERT_EQ(dash.status, 0) << dash.err;
  EXPECT_EQ(nlohmann::json::parse(dash.out)["devices"], 2);
  auto machine = run_tessel("simulate -w chain -d 2 -m h100-sxm-8 --write-machine -");
  ASSERT_EQ(machine.status, 0) << machine.err;
  EXPECT_EQ(nlohmann::json::parse(machine.out)["devices"].size(), 8u);
}

// Out of memory: exit 3 and a message naming what was being allocated and its size.
// (Under AddressSanitizer a virtual-memory limit stops the binary before main: skipped.)
TEST(ErrorSurfaceCli, OutOfMemoryIsExitCode3NamingTheAllocation) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve more virtual memory than the limit this test sets";
#else
  const std::string err = temp_path("tessel_oom_err").string();
  const std::string cmd = "bash -c 'ulimit -v 3000000; exec " + std::string(TESSEL_CLI_PATH) +
                          " run -w chain:size=30000 -d 1' 2>" + err;
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(err);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << ss.str();
  EXPECT_EQ(ss.str().rfind("tessel: error: out of memory allocating a tensor of shape [30000,30000]", 0), 0u) << ss.str();
#endif
}

// Threads that cannot be created (8 MiB stacks under a 300 MB address-space limit):
// exit 3 naming the thread, no file, instead of "terminate called without an active
// exception".
TEST(ErrorSurfaceCli, ThreadCreationFailureInCalibrateIsExitCode3) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve more virtual memory than the limit this test sets";
#else
  const std::string err = temp_path("tessel_threads_err").string();
  const std::string out = temp_path("tessel_threads_machine.json").string();
  fs::remove(out);
  const std::string cmd = "bash -c 'ulimit -v 300000; exec " + std::string(TESSEL_CLI_PATH) +
                          " calibrate -d 1000 --seconds 0.001 --rounds 1 -o " + out + "' 2>" + err;
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(err);
  ASSERT_TRUE(WIFEXITED(status)) << ss.str();
  EXPECT_EQ(WEXITSTATUS(status), 3) << ss.str();
  EXPECT_NE(ss.str().find("tessel: error: cannot start measuring thread"), std::string::npos) << ss.str();
  EXPECT_FALSE(fs::exists(out));
#endif
}

class OperandCli : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const auto& p : files_) fs::remove(p);
  }
  std::string npy(const std::string& name, const Tensor& t) {
    files_.push_back(temp_path(name).string() + ".npy");
    runtime::write_npy(files_.back(), t);
    return files_.back();
  }
  std::vector<std::string> files_;
};

// Nine operands (more than the maximum rank of 8) on both CPU backends: the right
// product, not a crash or zeros.
TEST_F(OperandCli, NineOperandsComputeTheProductOnBothBackends) {
  std::string args;
  double want = 1;
  for (int i = 0; i < 9; ++i) {
    args += " " + npy("tessel_op" + std::to_string(i), Tensor({5}, DType::f64, 1.0 + 0.25 * i));
    want *= 1.0 + 0.25 * i;
  }
  const std::string out = temp_path("tessel_op_out").string() + ".npy";
  files_.push_back(out);
  for (const char* backend : {"cpu", "block"}) {
    fs::remove(out);
    auto r = run_tessel("einsum 'i,i,i,i,i,i,i,i,i->i'" + args + " -o " + out + " -d 2 --backend " + backend);
    ASSERT_EQ(r.status, 0) << backend << "\n" << r.err;
    Tensor t = runtime::read_npy(out);
    for (double v : t.data) EXPECT_DOUBLE_EQ(v, want) << backend;
  }
}

// A result with NaN in it passes its own check (NaN where the reference has NaN), and a
// row max over a NaN is NaN as numpy's.
TEST_F(OperandCli, NaNResultsPassTheReferenceCheckAndMaxPropagatesThem) {
  Tensor a({2, 3}, DType::f64, 1.0);
  a.data[1] = std::nan("");
  const std::string in = npy("tessel_nan", a);
  const std::string out = temp_path("tessel_nan_out").string() + ".npy";
  files_.push_back(out);
  for (const char* backend : {"cpu", "block"}) {
    fs::remove(out);
    auto r = run_tessel("einsum 'ij->i' " + in + " --agg max -o " + out + " -d 2 --backend " + backend);
    ASSERT_EQ(r.status, 0) << backend << "\n" << r.err;
    Tensor t = runtime::read_npy(out);
    ASSERT_EQ(t.data.size(), 2u);
    EXPECT_TRUE(std::isnan(t.data[0])) << backend;
    EXPECT_EQ(t.data[1], 1.0) << backend;
  }
}

// A graph without an einsum node: every strategy plans it, simulate and compare run it.
TEST(ErrorSurfaceCli, AGraphWithoutAnEinsumWorksWithEveryStrategy) {
  const std::string g = temp_path("tessel_no_einsum.json").string();
  {
    std::ofstream(g) << R"({"nodes": [{"name": "x", "kind": "input", "shape": [8, 4]},
                                      {"name": "out", "kind": "output", "inputs": ["x"]}]})";
  }
  for (const char* s : {"eindecomp", "exhaustive", "data-parallel", "megatron", "sqrt-split", "block-per-device",
                        "split-largest"}) {
    auto r = run_tessel("plan -g " + g + " -d 2 -s " + s);
    EXPECT_EQ(r.status, 0) << s << "\n" << r.err;
    auto sim = run_tessel("simulate -g " + g + " -d 2 -s " + s + " -m cpu:2");
    EXPECT_EQ(sim.status, 0) << s << "\n" << sim.err;
  }
  auto r = run_tessel("compare -g " + g +
                      " -d 2 -s eindecomp,data-parallel --repeat 1 --warmup 0 --calibration-seconds 0.002");
  EXPECT_EQ(r.status, 0) << r.err;
  fs::remove(g);
}

}  // namespace
}  // namespace tessel

// Bad input to the core commands: a message naming the input, a non-zero exit, and no
// output file left behind.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "runtime/npy.h"
#include "tests/support/cli.h"

namespace tessel {
namespace {

using testing::run_tessel;
using testing::temp_path;

class EinsumCli : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = temp_path("tessel_a.npy").string();
    b_ = temp_path("tessel_b.npy").string();
    out_ = temp_path("tessel_out.npy").string();
    runtime::write_npy(a_, random_tensor({4, 3}, DType::f32, 1));
    runtime::write_npy(b_, random_tensor({3, 5}, DType::f32, 2));
    std::filesystem::remove(out_);
  }
  void TearDown() override {
    for (const auto& p : {a_, b_, out_}) std::filesystem::remove(p);
  }
  // Runs einsum with `args` and expects failure naming `needle`, and no output file.
  void expect_rejected(const std::string& args, const std::string& needle) {
    auto r = run_tessel("einsum " + args + " -o " + out_);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.err.find("tessel: error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err << "\nexpected: " << needle;
    EXPECT_FALSE(std::filesystem::exists(out_)) << args;
    EXPECT_FALSE(std::filesystem::exists(out_ + ".tmp-tessel")) << args;
  }
  std::string a_, b_, out_;
};

TEST_F(EinsumCli, ComputesAndWritesTheResult) {
  auto r = run_tessel("einsum 'ij,jk->ik' " + a_ + " " + b_ + " -o " + out_ + " -d 2 --parts i=2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  Tensor c = runtime::read_npy(out_);
  EXPECT_EQ(c.shape, (Shape{4, 5}));
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["check"][0]["pass"].get<bool>());
}

TEST_F(EinsumCli, MalformedSubscripts) { expect_rejected("'ij,jk->i->k' " + a_ + " " + b_, "more than one '->'"); }
TEST_F(EinsumCli, BadCharacter) { expect_rejected("'i1,jk->ik' " + a_ + " " + b_, "invalid character '1'"); }
TEST_F(EinsumCli, OperandCountMismatch) { expect_rejected("'ij,jk,kl->il' " + a_ + " " + b_, "3 operand(s)"); }
TEST_F(EinsumCli, InconsistentIndexSizes) { expect_rejected("'ij,kj->ik' " + a_ + " " + b_, "index 'j' has size 3"); }
TEST_F(EinsumCli, OutputIndexMissingFromInputs) { expect_rejected("'ij,jk->iz' " + a_ + " " + b_, "'z' appears in no input"); }
TEST_F(EinsumCli, TooManyParts) { expect_rejected("'ij,jk->ik' " + a_ + " " + b_ + " --parts i=9", "cannot be split into 9"); }
TEST_F(EinsumCli, UnknownPartLetter) { expect_rejected("'ij,jk->ik' " + a_ + " " + b_ + " --parts q=2", "'q' is not an index"); }
TEST_F(EinsumCli, UnknownAggregation) { expect_rejected("'ij,jk->ik' " + a_ + " " + b_ + " --agg avg", "unknown aggregation 'avg'"); }
TEST_F(EinsumCli, CommPriorityOffTheCudaBackend) {
  expect_rejected("'ij,jk->ik' " + a_ + " " + b_ + " --comm-priority high", "--comm-priority applies to --backend cuda");
}
TEST_F(EinsumCli, BadJoinFunction) { expect_rejected("'ij,jk->ik' " + a_ + " " + b_ + " --join 'foo(x0)'", "unknown function 'foo'"); }

TEST_F(EinsumCli, TruncatedNpy) {
  std::string bytes = runtime::encode_npy(random_tensor({4, 3}, DType::f32, 1));
  std::ofstream(a_, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 7));
  expect_rejected("'ij,jk->ik' " + a_ + " " + b_, "truncated data");
}

TEST_F(EinsumCli, NotAnNpyFile) {
  std::ofstream(a_) << "hello";
  expect_rejected("'ij,jk->ik' " + a_ + " " + b_, "not a .npy file");
}

TEST(LowerCli, UnknownWorkloadAndParameterAreNamed) {
  auto r = run_tessel("lower -w nosuch");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown workload 'nosuch' (built-in: chain, chain-sum, ffn, llama-block, gemm-alltoall, gemv-allreduce, "
                           "embedding-alltoall)"), std::string::npos)
      << r.err;
  r = run_tessel("lower -w chain:sise=4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown parameter 'sise'"), std::string::npos) << r.err;
  r = run_tessel("lower -w chain:size=-3");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("size=-3 is not a positive integer"), std::string::npos) << r.err;
}

TEST(LowerCli, BadDecompositionFilesAreNamedAndNothingIsWritten) {
  auto dec = temp_path("tessel_dec.json");
  auto written = temp_path("tessel_dec_out.json");
  std::filesystem::remove(written);
  std::ofstream(dec) << R"({"devices": 2, "nodes": [{"name": "XY", "parts": [2, 2)";  // truncated
  auto r = run_tessel("lower -w chain:size=8 --decomposition " + dec.string() + " --write-decomposition " +
                      written.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(dec.string() + ": malformed JSON"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(written));
  std::ofstream(dec) << R"({"devices": 2, "nodes": [{"name": "XY", "parts": [2, 2, 1], "devices": [0, 1, 2, 3]}]})";
  r = run_tessel("lower -w chain:size=8 --decomposition " + dec.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("device 2 out of range [0, 2)"), std::string::npos) << r.err;
  std::ofstream(dec) << R"({"devices": 2, "nodes": [{"name": "nope", "parts": [1, 1]}]})";
  r = run_tessel("lower -w chain:size=8 --decomposition " + dec.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("no node named 'nope'"), std::string::npos) << r.err;
  std::filesystem::remove(dec);
}

TEST(LowerCli, JsonSummaryAndAWrittenDecompositionThatLowersAgain) {
  auto dec = temp_path("tessel_dec_rt.json");
  auto r = run_tessel("lower -w ffn -d 4 --parts 4,gate=2x2x1 --json --write-decomposition " + dec.string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"tasks", "by_kind", "bytes_moved", "flops", "lower_wall_s"}) EXPECT_TRUE(j.contains(key)) << key;
  auto again = run_tessel("lower -w ffn --decomposition " + dec.string() + " --json");
  ASSERT_EQ(again.status, 0) << again.err;
  auto k = nlohmann::json::parse(again.out);
  EXPECT_EQ(k["tasks"], j["tasks"]);
  EXPECT_EQ(k["bytes_moved"], j["bytes_moved"]);
  std::filesystem::remove(dec);
}

TEST(RunCli, ChecksAgainstTheReferenceOnEveryWorkloadAndBackend) {
  for (const char* w : {"chain:size=32", "chain-sum:size=30,skewed=1", "ffn:tokens=16,dim=8,hidden=24",
                        "llama-block:model=tiny,seq=8", "gemm-alltoall:experts=2,tokens=8,dim=8,out=8",
                        "gemv-allreduce:rows=16,cols=16,batch=2", "embedding-alltoall:batch=8,tables=4,vocab=4,dim=8"})
    for (const char* backend : {"cpu", "block"}) {
      auto r = run_tessel(std::string("run -w ") + w + " -d 2 --backend " + backend + " --json");
      ASSERT_EQ(r.status, 0) << w << " " << backend << ": " << r.err;
      EXPECT_TRUE(nlohmann::json::parse(r.out)["correct"].get<bool>()) << w;
    }
}

// The CUDA backend's options change nothing on the others: refused, naming the option,
// as --copy-lane thread is off the cpu backend.
TEST(RunCli, CudaOptionsWithAnotherBackendAreRefused) {
  for (const std::string backend : {"cpu", "block"})
    for (const std::string option : {"--comm-priority high", "--comm-priority normal", "--gpus 1", "--moves nccl",
                                     "--tf32", "--launch stream", "--unmarked"}) {
      auto r = run_tessel("run -w chain:size=32 -d 2 --backend " + backend + " " + option);
      EXPECT_EQ(r.status, 1) << backend << " " << option << ": " << r.output();
      const std::string name = option.substr(0, option.find(' '));
      EXPECT_NE(r.err.find("tessel: error: " + name + " applies to --backend cuda"), std::string::npos) << r.err;
      EXPECT_EQ(r.out, "") << option;
    }
  auto ok = run_tessel("run -w chain:size=32 -d 2 --json");
  EXPECT_EQ(ok.status, 0) << ok.err;
}

TEST(WorkloadsCli, ListsTheBuiltInWorkloadsAsJson) {
  auto r = run_tessel("workloads --json");
  ASSERT_EQ(r.status, 0);
  auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> names;
  for (const auto& w : j) names.push_back(w["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"chain", "chain-sum", "ffn", "llama-block", "gemm-alltoall",
                                             "gemv-allreduce", "embedding-alltoall"}));
}

}  // namespace
}  // namespace tessel

// The reference's einsum kernel (runtime/kernels.h): its loop order and its threads do
// not change a single bit of the result.
#include "runtime/kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace tessel::runtime {
namespace {

Tensor random_tensor(const Shape& shape, std::uint32_t seed) {
  Tensor t(shape, DType::f64);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& x : t.data) x = u(rng);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && a.data.size() == b.data.size() &&
         std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(double)) == 0;
}

// A matmul written out by hand, each element's terms summed over the contracted index in
// increasing order from 0, as the join order asks.
TEST(EinsumKernel, MatmulEqualsTheHandWrittenSumBitForBit) {
  const std::int64_t M = 70, K = 150, N = 130;  // 1.4M join elements: threads split it
  Tensor a = random_tensor({M, K}, 1), b = random_tensor({K, N}, 2);
  Einsum e = Einsum::from_subscripts("ij,jk->ik", {{M, K}, {K, N}}, std::nullopt, std::nullopt, DType::f64);
  Tensor want({M, N}, DType::f64);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t k = 0; k < N; ++k) {
      double s = 0;
      for (std::int64_t j = 0; j < K; ++j) {
        volatile double p = a.data[i * K + j] * b.data[j * N + k];  // rounded, never fused into an FMA
        s += p;
      }
      want.data[i * N + k] = s;
    }
  for (int threads : {1, 2, 3, 8}) EXPECT_TRUE(same_bits(einsum_kernel(e, {&a, &b}, threads), want)) << threads;
}

TEST(EinsumKernel, ThreadCountDoesNotChangeABit) {
  struct Case {
    const char* subscripts;
    std::vector<Shape> shapes;
    std::optional<ScalarOp> join;
    std::optional<Agg> agg;
  };
  const std::vector<Case> cases = {
      {"bij,bjk->bik", {{4, 60, 70}, {4, 70, 80}}, std::nullopt, std::nullopt},
      {"ij,kj->ik", {{90, 120}, {110, 120}}, std::nullopt, std::nullopt},  // rows dotted: no loop moves
      {"ij->i", {{1100, 1000}}, std::nullopt, Agg::max},
      {"ij->j", {{1100, 1000}}, std::nullopt, Agg::sum},
      {"ij,ij->ij", {{1100, 1000}, {1100, 1000}}, ScalarOp::parse("mul(exp(x0),x1)"), std::nullopt},
      {"ii,ij->ij", {{1100, 1100}, {1100, 1000}}, std::nullopt, std::nullopt},  // a diagonal
      {"ij->", {{1100, 1000}}, std::nullopt, Agg::sum},                            // nothing to split
  };
  std::uint32_t seed = 10;
  for (const Case& c : cases) {
    Einsum e = Einsum::from_subscripts(c.subscripts, c.shapes, c.join, c.agg, DType::f64);
    std::vector<Tensor> ts;
    for (const Shape& s : c.shapes) ts.push_back(random_tensor(s, seed++));
    std::vector<const Tensor*> ops;
    for (const Tensor& t : ts) ops.push_back(&t);
    Tensor one = einsum_kernel(e, ops, 1);
    for (int threads : {2, 5, 16}) EXPECT_TRUE(same_bits(einsum_kernel(e, ops, threads), one)) << c.subscripts << ", " << threads;
  }
}

TEST(EinsumKernel, RoundsToTheDtypeAfterThreads) {
  Einsum e = Einsum::from_subscripts("ij,jk->ik", {{128, 128}, {128, 128}}, std::nullopt, std::nullopt, DType::f32);
  Tensor a = random_tensor({128, 128}, 3), b = random_tensor({128, 128}, 4);
  Tensor out = einsum_kernel(e, {&a, &b}, 4);
  EXPECT_EQ(out.dtype, DType::f32);
  for (double x : out.data) EXPECT_EQ(x, static_cast<double>(static_cast<float>(x)));
}

}  // namespace
}  // namespace tessel::runtime

#include "core/einsum.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/support/error_of.h"

namespace tessel {
namespace {

std::string error_of(const char* subs, std::vector<Shape> shapes) {
  return testing::error_of([&] { (void)Einsum::from_subscripts(subs, shapes); });
}

TEST(Einsum, GemmDimsSortJoinIndicesByTheirRoleInABatchedGemm) {
  // Attention scores: batch b and heads h in both operands and the output, queries s
  // from the first, keys t from the second, head dimension d aggregated.
  Einsum e = Einsum::from_subscripts("bhsd,bhtd->bhst", {{2, 4, 8, 16}, {2, 4, 6, 16}});
  GemmDims g = gemm_dims(e);
  EXPECT_EQ(g.batch, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.m, (std::vector<int>{2}));
  EXPECT_EQ(g.n, (std::vector<int>{3}));
  EXPECT_EQ(g.k, (std::vector<int>{4}));
  EXPECT_EQ(g.batch_size, 8);
  EXPECT_EQ(g.m_size, 8);
  EXPECT_EQ(g.n_size, 6);
  EXPECT_EQ(g.k_size, 16);
  // A plain matmul has no batch; its sizes multiply to the join space.
  GemmDims mm = gemm_dims(Einsum::from_subscripts("ij,jk->ik", {{2, 3}, {3, 5}}));
  EXPECT_TRUE(mm.batch.empty());
  EXPECT_EQ(mm.batch_size * mm.m_size * mm.n_size * mm.k_size, 2 * 3 * 5);
  EXPECT_EQ(mm.k_size, 3);
}

TEST(Einsum, MatmulHasOutputIndicesFirstThenAggregated) {
  Einsum e = Einsum::from_subscripts("ij,jk->ik", {{2, 3}, {3, 4}});
  EXPECT_EQ(e.join_shape, (Shape{2, 4, 3}));
  EXPECT_EQ(e.inputs, (std::vector<std::vector<int>>{{0, 2}, {2, 1}}));
  EXPECT_EQ(e.out_rank, 2);
  EXPECT_EQ(e.agg, Agg::sum);
  EXPECT_TRUE(e.join.is_product_of_two_holes());
  EXPECT_DOUBLE_EQ(e.flops(), 2.0 * 2 * 3 * 4);
  EXPECT_EQ(e.bytes(), (6 + 12 + 8) * 4);
  EXPECT_TRUE(e.is_contraction());
  EXPECT_EQ(e.subscripts(), "ac,cb->ab");
}

TEST(Einsum, ImplicitOutputIsTheOnceAppearingIndicesInAsciiOrder) {
  EXPECT_EQ(parse_subscripts("ij,jk").output, "ik");
  EXPECT_EQ(parse_subscripts("ba,ca").output, "bc");
  EXPECT_EQ(parse_subscripts("Ab,bC").output, "AC");  // upper case sorts first, as in numpy
  EXPECT_EQ(parse_subscripts("ii").output, "");       // trace
  EXPECT_FALSE(parse_subscripts("ij,jk").explicit_output);
}

TEST(Einsum, RepeatedIndicesReadDiagonals) {
  Einsum e = Einsum::from_subscripts("ii->i", {{5, 5}});
  EXPECT_EQ(e.join_shape, (Shape{5}));
  EXPECT_EQ(e.inputs[0], (std::vector<int>{0, 0}));
  EXPECT_FALSE(e.aggregates());
  Einsum f = Einsum::from_subscripts("aab,bc->ac", {{4, 4, 3}, {3, 2}});
  EXPECT_EQ(f.join_shape, (Shape{4, 2, 3}));
  EXPECT_FALSE(f.is_contraction());
}

TEST(Einsum, FullReductionToAScalar) {
  Einsum e = Einsum::from_subscripts("ab,ab->", {{3, 4}, {3, 4}});
  EXPECT_EQ(e.out_rank, 0);
  EXPECT_EQ(e.out_shape(), Shape{});
  EXPECT_EQ(e.agg, Agg::sum);
}

TEST(Einsum, CustomJoinAndAggregation) {
  Einsum e = Einsum::from_subscripts("ij->i", {{3, 4}}, ScalarOp::hole(0), Agg::max);
  EXPECT_EQ(e.agg, Agg::max);
  EXPECT_DOUBLE_EQ(e.flops(), 12.0);  // identity join (0 flops) + one max per element
  Einsum b = Einsum::from_subscripts("ij,j->ij", {{3, 4}, {4}}, ScalarOp::parse("sub(x0,x1)"));
  EXPECT_EQ(b.agg, Agg::none);
  EXPECT_FALSE(b.is_contraction());
}

TEST(Einsum, MalformedInputIsAnErrorNamingTheSubscripts) {
  EXPECT_NE(error_of("ij,jk->i->k", {{2, 3}, {3, 4}}).find("more than one '->'"), std::string::npos);
  EXPECT_NE(error_of("i1,jk->ik", {{2, 3}, {3, 4}}).find("invalid character '1'"), std::string::npos);
  EXPECT_NE(error_of("ij,jk->iz", {{2, 3}, {3, 4}}).find("output index 'z' appears in no input"), std::string::npos);
  EXPECT_NE(error_of("ij,jk->ii", {{2, 3}, {3, 4}}).find("output index 'i' appears more than once"),
            std::string::npos);
  EXPECT_NE(error_of("ij,jk->ik", {{2, 3}}).find("2 operand(s) in the subscripts but 1 given"), std::string::npos);
  EXPECT_NE(error_of("ij,jk->ik", {{2, 3}, {4, 4}}).find("index 'j' has size 3 elsewhere but 4"), std::string::npos);
  EXPECT_NE(error_of("ijk,jk->ik", {{2, 3}, {3, 4}}).find("has 2 dimension(s)"), std::string::npos);
  EXPECT_NE(error_of("...i,i->i", {{2, 3}, {3}}).find("ellipsis"), std::string::npos);
  EXPECT_EQ(error_of("ij,jk->ik", {{2, 3}, {3, 4}}), testing::kNoError);
}

TEST(Einsum, AnAggregatedIndexNeedsAnAggregation) {
  Einsum e = Einsum::from_subscripts("ij->i", {{2, 3}});
  e.agg = Agg::none;
  EXPECT_THROW(e.validate(), Error);
}

TEST(Einsum, JoinUsingMoreInputsThanOperandsIsRejected) {
  EXPECT_THROW((void)Einsum::from_subscripts("ij->ij", {{2, 3}}, ScalarOp::parse("add(x0,x1)")), Error);
}

}  // namespace
}  // namespace tessel

#include "core/scalar_op.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

#include "core/error.h"

namespace tessel {
namespace {

double eval(const char* text, std::vector<double> x) { return ScalarOp::parse(text).eval(x.data()); }

std::string parse_error(const std::string& text) {
  try {
    (void)ScalarOp::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ScalarOp, EveryFunctionEvaluatesToItsClosedForm) {
  EXPECT_DOUBLE_EQ(eval("add(x0,x1)", {2, 3}), 5);
  EXPECT_DOUBLE_EQ(eval("sub(x0,x1)", {2, 3}), -1);
  EXPECT_DOUBLE_EQ(eval("mul(x0,x1)", {2, 3}), 6);
  EXPECT_DOUBLE_EQ(eval("div(x0,x1)", {3, 2}), 1.5);
  EXPECT_DOUBLE_EQ(eval("max(x0,x1)", {2, 3}), 3);
  EXPECT_DOUBLE_EQ(eval("min(x0,x1)", {2, 3}), 2);
  EXPECT_DOUBLE_EQ(eval("pow(x0,x1)", {2, 3}), 8);
  EXPECT_DOUBLE_EQ(eval("neg(x0)", {2}), -2);
  EXPECT_DOUBLE_EQ(eval("exp(x0)", {1}), std::exp(1.0));
  EXPECT_DOUBLE_EQ(eval("log(x0)", {2}), std::log(2.0));
  EXPECT_DOUBLE_EQ(eval("sqrt(x0)", {9}), 3);
  EXPECT_DOUBLE_EQ(eval("rsqrt(x0)", {4}), 0.5);
  EXPECT_DOUBLE_EQ(eval("relu(x0)", {-2}), 0);
  EXPECT_DOUBLE_EQ(eval("relu(x0)", {2}), 2);
  EXPECT_DOUBLE_EQ(eval("silu(x0)", {1.5}), 1.5 / (1 + std::exp(-1.5)));
  EXPECT_DOUBLE_EQ(eval("gelu(x0)", {0.7}), 0.5 * 0.7 * (1 + std::erf(0.7 / std::sqrt(2.0))));
  EXPECT_DOUBLE_EQ(eval("sigmoid(x0)", {0.3}), 1 / (1 + std::exp(-0.3)));
  EXPECT_DOUBLE_EQ(eval("tanh(x0)", {0.3}), std::tanh(0.3));
  EXPECT_DOUBLE_EQ(eval("abs(x0)", {-4}), 4);
  EXPECT_DOUBLE_EQ(eval("lt(x0,x1)", {1, 2}), 1);
  EXPECT_DOUBLE_EQ(eval("le(x0,x1)", {2, 2}), 1);
  EXPECT_DOUBLE_EQ(eval("gt(x0,x1)", {1, 2}), 0);
  EXPECT_DOUBLE_EQ(eval("ge(x0,x1)", {1, 2}), 0);
  EXPECT_DOUBLE_EQ(eval("eq(x0,x1)", {2, 2}), 1);
  EXPECT_DOUBLE_EQ(eval("select(gt(x0,0),x0,mul(x0,0.01))", {-3}), -0.03);
  EXPECT_DOUBLE_EQ(eval("select(gt(x0,0),x0,mul(x0,0.01))", {3}), 3);
  EXPECT_EQ(eval("add(x0,-inf)", {1}), -INFINITY);
}

TEST(ScalarOp, PrintsAndParsesBack) {
  for (const char* text : {"mul(silu(x0),x1)", "exp(sub(x0,x1))", "add(mul(x0,0.125),x1)", "select(ge(x0,x1),x0,-inf)",
                           "rsqrt(add(mul(x0,0.000244140625),1e-05))", "x3"})
    EXPECT_EQ(ScalarOp::parse(text).to_string(), text);
}

TEST(ScalarOp, RandomExpressionsRoundTripExactly) {
  std::mt19937_64 rng(5);
  const ScalarFn fns[] = {ScalarFn::add, ScalarFn::mul, ScalarFn::exp, ScalarFn::select, ScalarFn::max, ScalarFn::neg};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ScalarOp> pool = {ScalarOp::hole(0), ScalarOp::hole(1),
                                  ScalarOp::constant(std::uniform_real_distribution<double>(-5, 5)(rng))};
    for (int step = 0; step < 6; ++step) {
      ScalarFn fn = fns[rng() % 6];
      std::vector<ScalarOp> args;
      for (int a = 0; a < arity(fn); ++a) args.push_back(pool[rng() % pool.size()]);
      pool.push_back(ScalarOp::apply(fn, args));
    }
    const ScalarOp& op = pool.back();
    ScalarOp back = ScalarOp::parse(op.to_string());
    EXPECT_EQ(back, op) << op.to_string();
    double x[2] = {0.3, -1.2};
    EXPECT_EQ(back.eval(x), op.eval(x)) << op.to_string();
  }
}

TEST(ScalarOp, CountsHolesAndFlops) {
  ScalarOp op = ScalarOp::parse("mul(silu(x0),x2)");
  EXPECT_EQ(op.num_holes(), 3);
  EXPECT_EQ(op.flops(), 2);
  EXPECT_TRUE(ScalarOp::product(2).is_product_of_two_holes());
  EXPECT_TRUE(ScalarOp::parse("mul(x1,x0)").is_product_of_two_holes());
  EXPECT_FALSE(ScalarOp::parse("mul(x0,x0)").is_product_of_two_holes());
}

TEST(ScalarOp, ParseErrorsNameTheTextAndPosition) {
  auto message = [](const char* text) {
    try {
      (void)ScalarOp::parse(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("foo(x0)").find("scalar function 'foo(x0)': unknown function 'foo' at position 0"),
            std::string::npos);
  EXPECT_NE(message("add(x0)").find("add takes 2 argument(s), got 1"), std::string::npos);
  EXPECT_NE(message("add(x0,x1").find("expected ',' or ')'"), std::string::npos);
  EXPECT_NE(message("add(x0,x1))").find("unexpected ')'"), std::string::npos);
  EXPECT_NE(message("1.2.3").find("bad number"), std::string::npos);
  EXPECT_NE(message("").find("unexpected end"), std::string::npos);
}

TEST(ScalarOp, DeepEvaluationStacksAreRejectedNotOverflowed) {
  // add(add(add(x0,x1),x1),x1)...: the stack never holds more than two values.
  std::string shallow = "x0";
  for (int i = 0; i < 100; ++i) shallow = "add(" + shallow + ",x1)";
  EXPECT_NO_THROW((void)ScalarOp::parse(shallow));
  // add(x1,add(x1,...x0)): every x1 waits on the stack for the subtree to its right.
  std::string deep = "x0";
  for (int i = 0; i < 40; ++i) deep = "add(x1," + deep + ")";
  EXPECT_THROW((void)ScalarOp::parse(deep), Error);
}

// Calls nested 200,000 deep (exp(exp(...)) needs a stack of one value, so the
// evaluation-stack bound does not catch it): a parse error naming the limit, not a
// stack overflow in the recursive parser.
TEST(ScalarOp, DeeplyNestedCallsAreAParseErrorNotAStackOverflow) {
  std::string deep;
  for (int i = 0; i < 200'000; ++i) deep += "exp(";
  deep += "x0";
  deep += std::string(200'000, ')');
  const std::string m = parse_error(deep);
  EXPECT_NE(m.find("calls nest deeper than 256 levels"), std::string::npos) << m.substr(0, 200);
  EXPECT_LT(m.size(), 300u) << "the message quotes a long text in part";
  std::string ok = "x0";
  for (int i = 0; i < 200; ++i) ok = "exp(" + ok + ")";
  EXPECT_NO_THROW((void)ScalarOp::parse(ok));
  // An input index too large for an int is an error, not index 0.
  EXPECT_NE(parse_error("x99999999999").find("input index 'x99999999999' is too large"), std::string::npos);
}

// numpy's join for an einsum of n operands, x0 * x1 * ... : the same program as
// multiplying factor by factor, built in linear time (an einsum of 200,000 operands
// took quadratic time before its first element).
TEST(ScalarOp, TheProductOfManyInputsIsBuiltInLinearTime) {
  ScalarOp chained = ScalarOp::hole(0);
  for (int i = 1; i < 6; ++i) chained = ScalarOp::apply(ScalarFn::mul, {chained, ScalarOp::hole(i)});
  EXPECT_EQ(ScalarOp::product(6), chained);
  const auto t0 = std::chrono::steady_clock::now();
  ScalarOp big = ScalarOp::product(200'000);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(big.num_holes(), 200'000);
  std::vector<double> ones(200'000, 1.0);
  ones[123] = 3.0;
  EXPECT_EQ(big.eval(ones.data()), 3.0);
}

}  // namespace
}  // namespace tessel

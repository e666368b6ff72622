#pragma once
// ScalarOp: the scalar join function of an extended einsum, a small expression
// over input holes (x0, x1, ...) and constants. Stored as a postfix program so that
// it is a plain value (comparable, cheap to evaluate) and prints / parses back:
//   mul(x0,x1)   exp(sub(x0,x1))   select(gt(x0,0),x0,mul(x0,0.01))

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

enum class ScalarFn : std::uint8_t {
  hole, constant,
  // binary
  add, sub, mul, div, max, min, pow, lt, le, gt, ge, eq,
  // unary
  neg, exp, log, sqrt, rsqrt, relu, silu, gelu, sigmoid, tanh, abs,
  // ternary: select(cond, a, b) = cond != 0 ? a : b
  select,
};

[[nodiscard]] int arity(ScalarFn fn);
[[nodiscard]] std::string_view name(ScalarFn fn);

class ScalarOp {
 public:
  // Deepest evaluation stack a function may need (values waiting for their operator);
  // apply() and parse() refuse deeper ones, so evaluators size their stacks by it.
  static constexpr int kMaxStack = 32;

  struct Instr {
    ScalarFn fn = ScalarFn::constant;
    std::int32_t hole = 0;  // for ScalarFn::hole
    double value = 0.0;     // for ScalarFn::constant
    friend bool operator==(const Instr&, const Instr&) = default;
  };

  ScalarOp() : program_{Instr{}} {}  // the constant 0
  [[nodiscard]] static ScalarOp hole(int index);
  [[nodiscard]] static ScalarOp constant(double value);
  [[nodiscard]] static ScalarOp apply(ScalarFn fn, const std::vector<ScalarOp>& args);
  // Parses the text form; throws Error naming the text and the position.
  [[nodiscard]] static ScalarOp parse(std::string_view text);
  // x0 * x1 * ... * x(n-1) (numpy einsum's join); x0 for n == 1.
  [[nodiscard]] static ScalarOp product(int n);

  [[nodiscard]] std::string to_string() const;
  // Number of holes the expression needs: highest hole index + 1.
  [[nodiscard]] int num_holes() const;
  // Floating-point operations per evaluation (one per function node).
  [[nodiscard]] int flops() const;
  // Of those, transcendental ones (exp, log, sqrt, rsqrt, pow, silu, gelu, sigmoid,
  // tanh): on a CPU each costs tens of arithmetic operations.
  [[nodiscard]] int transcendentals() const;
  [[nodiscard]] bool is_hole(int index) const;
  // True for x0*x1 (either order): the join of a plain contraction.
  [[nodiscard]] bool is_product_of_two_holes() const;
  [[nodiscard]] const std::vector<Instr>& program() const { return program_; }

  // Evaluates on `inputs` (at least num_holes() values).
  [[nodiscard]] double eval(const double* inputs) const;

  friend bool operator==(const ScalarOp&, const ScalarOp&) = default;

 private:
  std::vector<Instr> program_;
};

// Evaluates one function on already evaluated arguments.
[[nodiscard]] double apply_fn(ScalarFn fn, const double* args);

}  // namespace tessel

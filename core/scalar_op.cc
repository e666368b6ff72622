#include "core/scalar_op.h"

#include <array>
#include <cassert>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <limits>

#include "core/error.h"

namespace tessel {
namespace {

struct FnInfo {
  ScalarFn fn;
  std::string_view name;
  int arity;
};

constexpr std::array kFns = {
    FnInfo{ScalarFn::add, "add", 2},     FnInfo{ScalarFn::sub, "sub", 2},
    FnInfo{ScalarFn::mul, "mul", 2},     FnInfo{ScalarFn::div, "div", 2},
    FnInfo{ScalarFn::max, "max", 2},     FnInfo{ScalarFn::min, "min", 2},
    FnInfo{ScalarFn::pow, "pow", 2},     FnInfo{ScalarFn::lt, "lt", 2},
    FnInfo{ScalarFn::le, "le", 2},       FnInfo{ScalarFn::gt, "gt", 2},
    FnInfo{ScalarFn::ge, "ge", 2},       FnInfo{ScalarFn::eq, "eq", 2},
    FnInfo{ScalarFn::neg, "neg", 1},     FnInfo{ScalarFn::exp, "exp", 1},
    FnInfo{ScalarFn::log, "log", 1},     FnInfo{ScalarFn::sqrt, "sqrt", 1},
    FnInfo{ScalarFn::rsqrt, "rsqrt", 1}, FnInfo{ScalarFn::relu, "relu", 1},
    FnInfo{ScalarFn::silu, "silu", 1},   FnInfo{ScalarFn::gelu, "gelu", 1},
    FnInfo{ScalarFn::sigmoid, "sigmoid", 1}, FnInfo{ScalarFn::tanh, "tanh", 1},
    FnInfo{ScalarFn::abs, "abs", 1},     FnInfo{ScalarFn::select, "select", 3},
};

const FnInfo* find_fn(std::string_view n) {
  for (const auto& f : kFns)
    if (f.name == n) return &f;
  return nullptr;
}

std::string format_constant(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);  // shortest round-trip
  assert(ec == std::errc());
  return std::string(buf.data(), end);
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  ScalarOp parse_all() {
    ScalarOp op = parse_expr();
    skip_ws();
    if (pos_ != text_.size()) error("unexpected '", text_[pos_], "'");
    return op;
  }

 private:
  template <class... P>
  [[noreturn]] void error(P&&... parts) {
    // A long text is quoted by its first 60 characters.
    const std::string_view quoted = text_.size() > 80 ? text_.substr(0, 60) : text_;
    fail("scalar function '", quoted, text_.size() > 80 ? "...'" : "'", ": ", std::forward<P>(parts)..., " at position ",
         pos_);
  }
  void skip_ws() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  // Function calls may nest at most this deep: the parser recurses once per level (and
  // each level copies its arguments' programs), so a bound keeps a hostile text from
  // exhausting the stack or taking quadratic time.
  static constexpr int kMaxNesting = 256;

  ScalarOp parse_expr(int nesting = 0) {
    skip_ws();
    if (pos_ >= text_.size()) error("unexpected end");
    if (nesting > kMaxNesting) error("calls nest deeper than ", kMaxNesting, " levels");
    char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') {
      std::size_t start = pos_;
      if (c == '-' || c == '+') ++pos_;
      if (text_.substr(pos_, 3) == "inf") {
        pos_ += 3;
        return ScalarOp::constant(c == '-' ? -std::numeric_limits<double>::infinity()
                                           : std::numeric_limits<double>::infinity());
      }
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                     text_[pos_] == '.' ||
                                     ((text_[pos_] == '-' || text_[pos_] == '+') &&
                                      (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E'))))
        ++pos_;
      std::string_view num = text_.substr(start, pos_ - start);
      if (!num.empty() && num.front() == '+') num.remove_prefix(1);
      double v = 0;
      auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
      if (ec != std::errc() || end != num.data() + num.size()) {
        pos_ = start;
        error("bad number '", num, "'");
      }
      return ScalarOp::constant(v);
    }
    if (!std::isalpha(static_cast<unsigned char>(c))) error("unexpected '", c, "'");
    std::size_t start = pos_;
    while (pos_ < text_.size() && std::isalnum(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    std::string_view word = text_.substr(start, pos_ - start);
    if (word == "inf") return ScalarOp::constant(std::numeric_limits<double>::infinity());
    if (word.size() >= 2 && word[0] == 'x' &&
        word.substr(1).find_first_not_of("0123456789") == std::string_view::npos) {
      int index = 0;
      auto [end, ec] = std::from_chars(word.data() + 1, word.data() + word.size(), index);
      if (ec != std::errc() || end != word.data() + word.size()) {
        pos_ = start;
        error("input index '", word, "' is too large");
      }
      return ScalarOp::hole(index);
    }
    const FnInfo* fn = find_fn(word);
    if (!fn) {
      pos_ = start;
      error("unknown function '", word, "'");
    }
    skip_ws();
    if (pos_ >= text_.size() || text_[pos_] != '(') error("expected '(' after ", word);
    ++pos_;
    std::vector<ScalarOp> args;
    for (;;) {
      args.push_back(parse_expr(nesting + 1));
      skip_ws();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ')') {
        ++pos_;
        break;
      }
      error("expected ',' or ')'");
    }
    if (static_cast<int>(args.size()) != fn->arity)
      error(word, " takes ", fn->arity, " argument(s), got ", args.size());
    return ScalarOp::apply(fn->fn, args);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

int arity(ScalarFn fn) {
  // Relies on the grouping of the enumerators in scalar_op.h.
  if (fn >= ScalarFn::add && fn <= ScalarFn::eq) return 2;
  if (fn >= ScalarFn::neg && fn <= ScalarFn::abs) return 1;
  if (fn == ScalarFn::select) return 3;
  return 0;
}

std::string_view name(ScalarFn fn) {
  if (fn == ScalarFn::hole) return "hole";
  if (fn == ScalarFn::constant) return "constant";
  for (const auto& f : kFns)
    if (f.fn == fn) return f.name;
  return "?";
}

ScalarOp ScalarOp::hole(int index) {
  if (index < 0) fail("scalar function: hole index ", index, " is negative");
  ScalarOp op;
  op.program_ = {Instr{ScalarFn::hole, index, 0.0}};
  return op;
}

ScalarOp ScalarOp::constant(double value) {
  ScalarOp op;
  op.program_ = {Instr{ScalarFn::constant, 0, value}};
  return op;
}

ScalarOp ScalarOp::apply(ScalarFn fn, const std::vector<ScalarOp>& args) {
  if (static_cast<int>(args.size()) != arity(fn))
    fail("scalar function ", name(fn), " takes ", arity(fn), " argument(s), got ", args.size());
  ScalarOp op;
  op.program_.clear();
  for (const auto& a : args) op.program_.insert(op.program_.end(), a.program_.begin(), a.program_.end());
  op.program_.push_back(Instr{fn, 0, 0.0});
  // eval() uses a fixed stack: bound the nesting depth it needs.
  int depth = 0, max_depth = 0;
  for (const auto& in : op.program_) {
    depth += 1 - arity(in.fn);
    max_depth = std::max(max_depth, depth);
  }
  if (max_depth > kMaxStack) fail("scalar function nests deeper than ", kMaxStack, " levels");
  return op;
}

ScalarOp ScalarOp::parse(std::string_view text) { return Parser(text).parse_all(); }

ScalarOp ScalarOp::product(int n) {
  if (n <= 0) return constant(1.0);
  // x0 x1 mul x2 mul ...: built directly, linear in n (apply() per factor copied the
  // program each time, quadratic for an einsum of many operands); stack depth 2.
  ScalarOp op;
  op.program_ = {Instr{ScalarFn::hole, 0, 0.0}};
  op.program_.reserve(static_cast<std::size_t>(2 * n - 1));
  for (int i = 1; i < n; ++i) {
    op.program_.push_back(Instr{ScalarFn::hole, i, 0.0});
    op.program_.push_back(Instr{ScalarFn::mul, 0, 0.0});
  }
  return op;
}

std::string ScalarOp::to_string() const {
  std::vector<std::string> stack;
  for (const auto& in : program_) {
    if (in.fn == ScalarFn::hole) {
      stack.push_back("x" + std::to_string(in.hole));
    } else if (in.fn == ScalarFn::constant) {
      stack.push_back(format_constant(in.value));
    } else {
      int a = arity(in.fn);
      std::string s(name(in.fn));
      s += '(';
      for (int i = 0; i < a; ++i) {
        if (i) s += ',';
        s += stack[stack.size() - a + i];
      }
      s += ')';
      stack.resize(stack.size() - a);
      stack.push_back(std::move(s));
    }
  }
  assert(stack.size() == 1);
  return stack.back();
}

int ScalarOp::num_holes() const {
  int n = 0;
  for (const auto& in : program_)
    if (in.fn == ScalarFn::hole) n = std::max(n, in.hole + 1);
  return n;
}

int ScalarOp::flops() const {
  int n = 0;
  for (const auto& in : program_)
    if (in.fn != ScalarFn::hole && in.fn != ScalarFn::constant) ++n;
  return n;
}

int ScalarOp::transcendentals() const {
  int n = 0;
  for (const auto& in : program_)
    switch (in.fn) {
      case ScalarFn::exp:
      case ScalarFn::log:
      case ScalarFn::sqrt:
      case ScalarFn::rsqrt:
      case ScalarFn::pow:
      case ScalarFn::silu:
      case ScalarFn::gelu:
      case ScalarFn::sigmoid:
      case ScalarFn::tanh: ++n; break;
      default: break;
    }
  return n;
}

bool ScalarOp::is_hole(int index) const {
  return program_.size() == 1 && program_[0].fn == ScalarFn::hole && program_[0].hole == index;
}

bool ScalarOp::is_product_of_two_holes() const {
  return program_.size() == 3 && program_[0].fn == ScalarFn::hole && program_[1].fn == ScalarFn::hole &&
         program_[2].fn == ScalarFn::mul &&
         ((program_[0].hole == 0 && program_[1].hole == 1) || (program_[0].hole == 1 && program_[1].hole == 0));
}

double apply_fn(ScalarFn fn, const double* a) {
  switch (fn) {
    case ScalarFn::add: return a[0] + a[1];
    case ScalarFn::sub: return a[0] - a[1];
    case ScalarFn::mul: return a[0] * a[1];
    case ScalarFn::div: return a[0] / a[1];
    // numpy's maximum / minimum: NaN in either argument gives NaN.
    case ScalarFn::max: return std::isnan(a[1]) ? a[1] : (a[1] > a[0] ? a[1] : a[0]);
    case ScalarFn::min: return std::isnan(a[1]) ? a[1] : (a[1] < a[0] ? a[1] : a[0]);
    case ScalarFn::pow: return std::pow(a[0], a[1]);
    case ScalarFn::lt: return a[0] < a[1] ? 1.0 : 0.0;
    case ScalarFn::le: return a[0] <= a[1] ? 1.0 : 0.0;
    case ScalarFn::gt: return a[0] > a[1] ? 1.0 : 0.0;
    case ScalarFn::ge: return a[0] >= a[1] ? 1.0 : 0.0;
    case ScalarFn::eq: return a[0] == a[1] ? 1.0 : 0.0;
    case ScalarFn::neg: return -a[0];
    case ScalarFn::exp: return std::exp(a[0]);
    case ScalarFn::log: return std::log(a[0]);
    case ScalarFn::sqrt: return std::sqrt(a[0]);
    case ScalarFn::rsqrt: return 1.0 / std::sqrt(a[0]);
    case ScalarFn::relu: return a[0] > 0 ? a[0] : 0.0;
    case ScalarFn::silu: return a[0] / (1.0 + std::exp(-a[0]));
    case ScalarFn::gelu: return 0.5 * a[0] * (1.0 + std::erf(a[0] / std::sqrt(2.0)));
    case ScalarFn::sigmoid: return 1.0 / (1.0 + std::exp(-a[0]));
    case ScalarFn::tanh: return std::tanh(a[0]);
    case ScalarFn::abs: return std::fabs(a[0]);
    case ScalarFn::select: return a[0] != 0.0 ? a[1] : a[2];
    case ScalarFn::hole:
    case ScalarFn::constant: break;
  }
  assert(false);
  return 0.0;
}

double ScalarOp::eval(const double* inputs) const {
  std::array<double, kMaxStack> stack;
  std::size_t top = 0;
  for (const auto& in : program_) {
    switch (in.fn) {
      case ScalarFn::hole: stack[top++] = inputs[in.hole]; break;
      case ScalarFn::constant: stack[top++] = in.value; break;
      default: {
        int a = arity(in.fn);
        top -= a;
        stack[top] = apply_fn(in.fn, &stack[top]);
        ++top;
      }
    }
  }
  return stack[0];
}

}  // namespace tessel

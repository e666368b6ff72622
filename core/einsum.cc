#include "core/einsum.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "core/checked.h"
#include "core/error.h"

namespace tessel {

Subscripts parse_subscripts(std::string_view text) {
  auto is_letter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  Subscripts s;
  std::string_view lhs = text;
  std::size_t arrow = text.find("->");
  if (arrow != std::string_view::npos) {
    lhs = text.substr(0, arrow);
    std::string_view rhs = text.substr(arrow + 2);
    if (rhs.find("->") != std::string_view::npos) fail("einsum '", text, "': more than one '->'");
    s.explicit_output = true;
    for (char c : rhs) {
      if (c == ' ') continue;
      if (c == '.') fail("einsum '", text, "': ellipsis '...' is not supported; name every index");
      if (!is_letter(c)) fail("einsum '", text, "': invalid character '", c, "' in the output");
      if (s.output.find(c) != std::string::npos)
        fail("einsum '", text, "': output index '", c, "' appears more than once");
      s.output += c;
    }
  }
  std::string cur;
  for (char c : lhs) {
    if (c == ' ') continue;
    if (c == ',') {
      s.inputs.push_back(cur);
      cur.clear();
      continue;
    }
    if (c == '.') fail("einsum '", text, "': ellipsis '...' is not supported; name every index");
    if (c == '-' || c == '>') fail("einsum '", text, "': malformed '->'");
    if (!is_letter(c)) fail("einsum '", text, "': invalid character '", c, "'");
    cur += c;
  }
  s.inputs.push_back(cur);
  if (!s.explicit_output) {
    std::map<char, int> count;
    for (const auto& in : s.inputs)
      for (char c : in) ++count[c];
    std::string out;
    for (auto [c, n] : count)
      if (n == 1) out += c;
    // numpy orders implicit output alphabetically with upper case first (ASCII order).
    s.output = out;
  }
  for (char c : s.output) {
    bool found = std::any_of(s.inputs.begin(), s.inputs.end(),
                             [c](const std::string& in) { return in.find(c) != std::string::npos; });
    if (!found) fail("einsum '", text, "': output index '", c, "' appears in no input");
  }
  return s;
}

Einsum Einsum::from_subscripts(std::string_view subscripts, const std::vector<Shape>& input_shapes,
                               std::optional<ScalarOp> join, std::optional<Agg> agg, DType dtype) {
  Subscripts s = parse_subscripts(subscripts);
  if (s.inputs.size() != input_shapes.size())
    fail("einsum '", subscripts, "': ", s.inputs.size(), " operand(s) in the subscripts but ", input_shapes.size(),
         " given");
  // Join index order: output letters, then aggregated letters by first appearance.
  std::string order = s.output;
  for (const auto& in : s.inputs)
    for (char c : in)
      if (order.find(c) == std::string::npos) order += c;
  if (order.size() > static_cast<std::size_t>(kMaxRank))
    fail("einsum '", subscripts, "': ", order.size(), " distinct indices exceed the maximum of ", kMaxRank);
  Einsum e;
  e.out_rank = static_cast<int>(s.output.size());
  e.join_shape.assign(order.size(), -1);
  for (std::size_t i = 0; i < s.inputs.size(); ++i) {
    const std::string& in = s.inputs[i];
    if (in.size() != input_shapes[i].size())
      fail("einsum '", subscripts, "': operand ", i, " has ", input_shapes[i].size(), " dimension(s) ",
           tessel::to_string(input_shapes[i]), " but subscripts '", in, "' name ", in.size());
    std::vector<int> idx;
    for (std::size_t k = 0; k < in.size(); ++k) {
      int j = static_cast<int>(order.find(in[k]));
      std::int64_t size = input_shapes[i][k];
      if (size <= 0) fail("einsum '", subscripts, "': operand ", i, " has a dimension of size ", size);
      if (e.join_shape[j] == -1) {
        e.join_shape[j] = size;
      } else if (e.join_shape[j] != size) {
        fail("einsum '", subscripts, "': index '", in[k], "' has size ", e.join_shape[j], " elsewhere but ", size,
             " in operand ", i, " ", tessel::to_string(input_shapes[i]));
      }
      idx.push_back(j);
    }
    e.inputs.push_back(std::move(idx));
  }
  e.join = join ? *join : ScalarOp::product(static_cast<int>(s.inputs.size()));
  e.agg = agg ? *agg : (e.aggregates() ? Agg::sum : Agg::none);
  e.dtype = dtype;
  try {
    e.validate();
  } catch (const Error& err) {
    fail("einsum '", subscripts, "': ", err.what());
  }
  return e;
}

void Einsum::validate() const {
  if (join_shape.size() > static_cast<std::size_t>(kMaxRank))
    fail("join rank ", join_shape.size(), " exceeds the maximum of ", kMaxRank);
  if (out_rank < 0 || out_rank > rank()) fail("output rank ", out_rank, " outside [0, ", rank(), "]");
  for (auto d : join_shape)
    if (d <= 0) fail("join shape ", tessel::to_string(join_shape), " has a non-positive size");
  if (inputs.empty()) fail("an einsum needs at least one input");
  (void)elements(join_shape);  // throws when the join space's element count overflows
  std::vector<bool> used(join_shape.size(), false);
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (int j : inputs[i]) {
      if (j < 0 || j >= rank()) fail("input ", i, " reads join index ", j, " of ", rank());
      used[j] = true;
    }
  for (std::size_t j = 0; j < used.size(); ++j)
    if (!used[j]) fail("join index ", j, " is read by no input");
  if (join.num_holes() > static_cast<int>(inputs.size()))
    fail("join function ", join.to_string(), " uses ", join.num_holes(), " inputs but the einsum has ", inputs.size());
  (void)bytes();  // throws when its operands' bytes overflow
  if (aggregates() && agg == Agg::none)
    fail("indices are aggregated (join rank ", rank(), " > output rank ", out_rank, ") but no aggregation is given");
  if (!aggregates() && agg != Agg::none) {
    // An aggregation with nothing to aggregate is harmless; keep it canonical.
  }
}

Shape Einsum::input_shape(int i) const {
  Shape s;
  for (int j : inputs[i]) s.push_back(join_shape[j]);
  return s;
}

std::int64_t Einsum::bytes() const {
  std::int64_t n = elements(out_shape());
  for (std::size_t i = 0; i < inputs.size(); ++i)
    n = checked_add(n, elements(input_shape(static_cast<int>(i))), "einsum " + subscripts() + ": elements of its operands");
  return checked_mul(n, dtype_bytes(dtype), "einsum " + subscripts() + ": bytes of its operands");
}

bool Einsum::is_contraction() const {
  if (inputs.size() != 2 || !join.is_product_of_two_holes() || !aggregates() || agg != Agg::sum) return false;
  for (const auto& idx : inputs)
    for (std::size_t a = 0; a < idx.size(); ++a)
      for (std::size_t b = a + 1; b < idx.size(); ++b)
        if (idx[a] == idx[b]) return false;  // a diagonal
  auto reads = [](const std::vector<int>& v, int j) { return std::find(v.begin(), v.end(), j) != v.end(); };
  for (int j = out_rank; j < rank(); ++j)
    if (!reads(inputs[0], j) || !reads(inputs[1], j)) return false;  // summed within one operand only
  return true;
}

Einsum Einsum::with_join_shape(const Shape& block) const {
  Einsum e = *this;
  e.join_shape = block;
  return e;
}

std::string Einsum::subscripts() const {
  auto letter = [](int j) { return static_cast<char>(j < 26 ? 'a' + j : 'A' + (j - 26)); };
  std::string s;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (i) s += ',';
    for (int j : inputs[i]) s += letter(j);
  }
  s += "->";
  for (int j = 0; j < out_rank; ++j) s += letter(j);
  return s;
}

std::string Einsum::to_string() const {
  std::ostringstream os;
  os << subscripts() << " shape " << tessel::to_string(join_shape) << " join " << join.to_string();
  if (agg != Agg::none) os << " agg " << tessel::to_string(agg);
  return os.str();
}

GemmDims gemm_dims(const Einsum& e) {
  auto reads = [](const std::vector<int>& v, int j) { return std::find(v.begin(), v.end(), j) != v.end(); };
  GemmDims d;
  for (int j = 0; j < e.rank(); ++j) {
    const bool a = reads(e.inputs[0], j), b = reads(e.inputs[1], j), o = j < e.out_rank;
    const std::int64_t size = e.join_shape[static_cast<std::size_t>(j)];
    if (a && b && o) {
      d.batch.push_back(j);
      d.batch_size *= size;
    } else if (a && o) {
      d.m.push_back(j);
      d.m_size *= size;
    } else if (b && o) {
      d.n.push_back(j);
      d.n_size *= size;
    } else {
      d.k.push_back(j);
      d.k_size *= size;
    }
  }
  return d;
}

}  // namespace tessel

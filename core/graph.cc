#include "core/graph.h"

#include <algorithm>

#include "core/checked.h"
#include "core/error.h"

namespace tessel {

std::string_view to_string(NodeKind k) {
  switch (k) {
    case NodeKind::input: return "input";
    case NodeKind::einsum: return "einsum";
    case NodeKind::output: return "output";
    case NodeKind::select: return "select";
    case NodeKind::fill: return "fill";
  }
  return "?";
}

std::vector<NodeId> Graph::ids() const {
  std::vector<NodeId> out;
  out.reserve(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) out.emplace_back(static_cast<std::int32_t>(i));
  return out;
}

std::vector<NodeId> Graph::inputs() const {
  std::vector<NodeId> out;
  for (NodeId id : ids())
    if (node(id).kind == NodeKind::input) out.push_back(id);
  return out;
}

std::vector<NodeId> Graph::outputs() const {
  std::vector<NodeId> out;
  for (NodeId id : ids())
    if (node(id).kind == NodeKind::output) out.push_back(id);
  return out;
}

std::optional<NodeId> Graph::find(std::string_view name) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].name == name) return NodeId(static_cast<std::int32_t>(i));
  return std::nullopt;
}

NodeId Graph::at(std::string_view name) const {
  if (auto id = find(name)) return *id;
  fail("graph: no node named '", name, "'");
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> out(nodes_.size());
  for (NodeId id : ids())
    for (NodeId in : node(id).inputs)
      if (out[in.index()].empty() || out[in.index()].back() != id) out[in.index()].push_back(id);
  return out;
}

Shape Graph::join_shape(NodeId id) const {
  const Node& n = node(id);
  return n.kind == NodeKind::einsum ? n.einsum.join_shape : n.shape;
}

int Graph::out_rank(NodeId id) const {
  const Node& n = node(id);
  return n.kind == NodeKind::einsum ? n.einsum.out_rank : static_cast<int>(n.shape.size());
}

std::string_view to_string(InputRole r) {
  switch (r) {
    case InputRole::unspecified: return "unspecified";
    case InputRole::data: return "data";
    case InputRole::weight: return "weight";
  }
  return "?";
}

namespace {

// Error naming the node when an annotation does not fit it.
void check_annotation(const Node& n, InputRole role, const IndexRoles& roles) {
  if (n.kind != NodeKind::input && (role != InputRole::unspecified || roles.any()))
    fail("graph: node '", n.name, "' (", to_string(n.kind), "): only inputs take a data/weight role or index roles");
  const int rank = static_cast<int>(n.shape.size());
  for (auto [what, dim] : {std::pair{"batch", roles.batch}, {"sequence", roles.sequence}, {"heads", roles.heads}})
    if (dim < -1 || dim >= rank)
      fail("graph: node '", n.name, "' (shape ", to_string(n.shape), "): the ", what, " annotation names index ", dim,
           ", but the node has ", rank == 0 ? std::string("none") : "indices 0.." + std::to_string(rank - 1));
}

}  // namespace

void Graph::annotate(NodeId id, InputRole role, IndexRoles roles) {
  if (!id.valid() || id.index() >= nodes_.size()) fail("graph: annotate: node id ", id.value, " does not name a node");
  Node& n = nodes_[id.index()];
  check_annotation(n, role, roles);
  n.role = role;
  n.index_roles = roles;
}

std::vector<bool> weight_inputs(const Graph& g) {
  std::vector<bool> out(g.size(), false);
  bool annotated = false;
  for (NodeId id : g.inputs()) annotated = annotated || g.node(id).role != InputRole::unspecified;
  bool first = true;
  for (NodeId id : g.inputs()) {
    out[id.index()] = annotated ? g.node(id).role == InputRole::weight : !first;
    first = false;
  }
  return out;
}

void Graph::check(const Node& n) const {
  auto where = [&] { return "node '" + n.name + "' (" + std::string(to_string(n.kind)) + ")"; };
  check_annotation(n, n.role, n.index_roles);
  if (n.name.empty()) fail("graph: a node has an empty name");
  if (find(n.name)) fail("graph: ", where(), ": the name is already used");
  for (NodeId in : n.inputs)
    if (!in.valid() || in.index() >= nodes_.size())
      fail("graph: ", where(), ": input id ", in.value, " does not name an earlier node");
  for (NodeId in : n.inputs)
    if (node(in).kind == NodeKind::output) fail("graph: ", where(), ": reads output node '", node(in).name, "'");
  if (n.shape.size() > static_cast<std::size_t>(kMaxRank))
    fail("graph: ", where(), ": rank ", n.shape.size(), " exceeds the maximum of ", kMaxRank);
  for (auto d : n.shape)
    if (d <= 0) fail("graph: ", where(), ": shape ", to_string(n.shape), " has a non-positive size");
  try {
    (void)checked_mul(elements(n.shape), dtype_bytes(n.dtype), "bytes");
  } catch (const Error& e) {
    fail("graph: ", where(), ": ", e.what());
  }
  switch (n.kind) {
    case NodeKind::input:
    case NodeKind::fill:
      if (!n.inputs.empty()) fail("graph: ", where(), " takes no inputs");
      if (n.kind == NodeKind::fill && n.fill.kind == Fill::Kind::lower_triangular && n.shape.size() < 2)
        fail("graph: ", where(), ": a lower-triangular fill needs rank >= 2, got ", to_string(n.shape));
      break;
    case NodeKind::output:
      if (n.inputs.size() != 1) fail("graph: ", where(), " takes exactly one input, got ", n.inputs.size());
      if (node(n.inputs[0]).shape != n.shape)
        fail("graph: ", where(), ": shape ", to_string(n.shape), " differs from its input's ",
             to_string(node(n.inputs[0]).shape));
      break;
    case NodeKind::einsum: {
      try {
        n.einsum.validate();
      } catch (const Error& e) {
        fail("graph: ", where(), ": ", e.what());
      }
      if (n.einsum.inputs.size() != n.inputs.size())
        fail("graph: ", where(), ": the einsum has ", n.einsum.inputs.size(), " operands but the node ",
             n.inputs.size(), " inputs");
      for (std::size_t i = 0; i < n.inputs.size(); ++i) {
        Shape want = n.einsum.input_shape(static_cast<int>(i));
        const Shape& have = node(n.inputs[i]).shape;
        if (want != have)
          fail("graph: ", where(), ": operand ", i, " ('", node(n.inputs[i]).name, "') has shape ", to_string(have),
               " but ", n.einsum.subscripts(), " needs ", to_string(want));
      }
      if (n.einsum.out_shape() != n.shape)
        fail("graph: ", where(), ": shape ", to_string(n.shape), " differs from the einsum's output ",
             to_string(n.einsum.out_shape()));
      break;
    }
    case NodeKind::select: {
      if (n.pieces.empty()) fail("graph: ", where(), " has no pieces");
      std::int64_t covered = 0;
      std::vector<Rect> dst;
      for (std::size_t p = 0; p < n.pieces.size(); ++p) {
        const SelectPiece& pc = n.pieces[p];
        if (pc.input < 0 || static_cast<std::size_t>(pc.input) >= n.inputs.size())
          fail("graph: ", where(), ": piece ", p, " reads input ", pc.input, " of ", n.inputs.size());
        const Shape& src = node(n.inputs[pc.input]).shape;
        if (pc.src_offset.size() != src.size() || pc.size.size() != src.size() ||
            pc.dst_offset.size() != n.shape.size() || src.size() != n.shape.size())
          fail("graph: ", where(), ": piece ", p, " does not match the ranks of its input and output");
        Rect r;
        r.rank = static_cast<int>(n.shape.size());
        for (std::size_t d = 0; d < src.size(); ++d) {
          if (pc.size[d] <= 0 || pc.src_offset[d] < 0 || pc.src_offset[d] + pc.size[d] > src[d] ||
              pc.dst_offset[d] < 0 || pc.dst_offset[d] + pc.size[d] > n.shape[d])
            fail("graph: ", where(), ": piece ", p, " reaches outside its input ", to_string(src), " or output ",
                 to_string(n.shape));
          r.offset[d] = pc.dst_offset[d];
          r.size[d] = pc.size[d];
        }
        for (const Rect& other : dst) {
          Rect x;
          if (intersect(r, other, &x)) fail("graph: ", where(), ": piece ", p, " overlaps an earlier piece");
        }
        dst.push_back(r);
        covered += r.elements();
      }
      if (covered != elements(n.shape))
        fail("graph: ", where(), ": pieces cover ", covered, " of ", elements(n.shape), " elements");
      break;
    }
  }
}

NodeId Graph::add(Node node) {
  check(node);
  nodes_.push_back(std::move(node));
  return NodeId(static_cast<std::int32_t>(nodes_.size() - 1));
}

// ---- GraphBuilder ---------------------------------------------------------------

std::string GraphBuilder::name_or_default(std::string name, std::string_view kind) const {
  if (!name.empty()) return name;
  return std::string(kind) + std::to_string(graph_.size());
}

NodeId GraphBuilder::add(Node n) { return graph_.add(std::move(n)); }

NodeId GraphBuilder::input(std::string name, Shape shape) {
  Node n;
  n.kind = NodeKind::input;
  n.name = name_or_default(std::move(name), "input");
  n.shape = std::move(shape);
  n.dtype = dtype_;
  return add(std::move(n));
}

NodeId GraphBuilder::weight(std::string name, Shape shape, IndexRoles roles) {
  NodeId id = input(std::move(name), std::move(shape));
  annotate(id, InputRole::weight, roles);
  return id;
}

NodeId GraphBuilder::einsum(std::string_view subscripts, const std::vector<NodeId>& args, std::string_view join,
                            std::optional<Agg> agg, std::string name) {
  std::vector<Shape> shapes;
  for (NodeId a : args) {
    if (!a.valid() || a.index() >= graph_.size())
      fail("einsum '", subscripts, "': operand id ", a.value, " does not name a node");
    shapes.push_back(graph_.node(a).shape);
  }
  std::optional<ScalarOp> op;
  if (!join.empty()) op = ScalarOp::parse(join);
  Node n;
  n.kind = NodeKind::einsum;
  n.name = name_or_default(std::move(name), "einsum");
  n.inputs = args;
  n.dtype = dtype_;
  n.einsum = Einsum::from_subscripts(subscripts, shapes, op, agg, dtype_);
  n.shape = n.einsum.out_shape();
  return add(std::move(n));
}

NodeId GraphBuilder::map(std::string_view join, const std::vector<NodeId>& args, std::string name) {
  if (args.empty()) fail("map '", join, "': needs at least one operand");
  const Shape& s = graph_.node(args.at(0)).shape;
  std::string idx;
  for (std::size_t d = 0; d < s.size(); ++d) idx += static_cast<char>('a' + d);
  std::string subs;
  for (std::size_t i = 0; i < args.size(); ++i) subs += (i ? "," : "") + idx;
  subs += "->" + idx;
  return einsum(subs, args, join, std::nullopt, std::move(name));
}

NodeId GraphBuilder::reduce(std::string_view subscripts, NodeId arg, Agg agg, std::string name) {
  return einsum(subscripts, {arg}, "x0", agg, std::move(name));
}

NodeId GraphBuilder::matmul(NodeId a, NodeId b, std::string name) {
  return einsum("ij,jk->ik", {a, b}, {}, std::nullopt, std::move(name));
}

NodeId GraphBuilder::slice(NodeId arg, Shape offset, Shape size, std::string name) {
  Node n;
  n.kind = NodeKind::select;
  n.name = name_or_default(std::move(name), "slice");
  n.inputs = {arg};
  n.shape = size;
  n.dtype = graph_.node(arg).dtype;
  n.pieces = {SelectPiece{0, std::move(offset), Shape(size.size(), 0), size}};
  return add(std::move(n));
}

NodeId GraphBuilder::concat(const std::vector<NodeId>& args, int dim, std::string name) {
  if (args.empty()) fail("concat: needs at least one operand");
  Node n;
  n.kind = NodeKind::select;
  n.name = name_or_default(std::move(name), "concat");
  n.inputs = args;
  n.shape = graph_.node(args[0]).shape;
  n.dtype = graph_.node(args[0]).dtype;
  if (dim < 0 || dim >= static_cast<int>(n.shape.size()))
    fail("concat '", n.name, "': dimension ", dim, " outside the rank ", n.shape.size());
  n.shape[dim] = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Shape& s = graph_.node(args[i]).shape;
    if (s.size() != n.shape.size()) fail("concat '", n.name, "': operand ", i, " has rank ", s.size());
    for (std::size_t d = 0; d < s.size(); ++d)
      if (static_cast<int>(d) != dim && s[d] != n.shape[d])
        fail("concat '", n.name, "': operand ", i, " has shape ", to_string(s), ", which differs off dimension ",
             dim);
    SelectPiece p{static_cast<int>(i), Shape(s.size(), 0), Shape(s.size(), 0), s};
    p.dst_offset[dim] = n.shape[dim];
    n.shape[dim] += s[dim];
    n.pieces.push_back(std::move(p));
  }
  return add(std::move(n));
}

NodeId GraphBuilder::constant(Shape shape, double value, std::string name) {
  Node n;
  n.kind = NodeKind::fill;
  n.name = name_or_default(std::move(name), "fill");
  n.shape = std::move(shape);
  n.dtype = dtype_;
  n.fill = Fill{Fill::Kind::constant, value, 0.0};
  return add(std::move(n));
}

NodeId GraphBuilder::lower_triangular(Shape shape, double value, double value_off, std::string name) {
  Node n;
  n.kind = NodeKind::fill;
  n.name = name_or_default(std::move(name), "mask");
  n.shape = std::move(shape);
  n.dtype = dtype_;
  n.fill = Fill{Fill::Kind::lower_triangular, value, value_off};
  return add(std::move(n));
}

NodeId GraphBuilder::output(NodeId arg, std::string name) {
  Node n;
  n.kind = NodeKind::output;
  n.name = name_or_default(std::move(name), "output");
  n.inputs = {arg};
  n.shape = graph_.node(arg).shape;
  n.dtype = graph_.node(arg).dtype;
  return add(std::move(n));
}

}  // namespace tessel

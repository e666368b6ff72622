#pragma once
// Graph: a DAG of tensor operations. Nodes are added in topological order (an input of
// a node always has a smaller id), and every edge is shape-checked when it is added.
//
//   input    a named tensor given at run time
//   einsum   an extended einsum over its inputs (core/einsum.h)
//   output   marks its single input as a result of the graph
//   select   builds its tensor from hyper-rectangles of its inputs (slice, concat)
//   fill     a constant tensor, or a causal (lower-triangular) mask
//
// GraphBuilder (below) reads like the math:
//   GraphBuilder g;
//   auto x = g.input("x", {m, k});
//   auto w = g.input("w", {k, n});
//   auto y = g.einsum("mk,kn->mn", {x, w});
//   g.output(g.map("silu(x0)", y), "y");

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/einsum.h"
#include "core/ids.h"
#include "core/types.h"

namespace tessel {

enum class NodeKind : std::uint8_t { input, einsum, output, select, fill };
[[nodiscard]] std::string_view to_string(NodeKind k);

// One piece of a select: the rectangle [src_offset, src_offset + size) of input
// `input` lands at dst_offset of the output.
struct SelectPiece {
  int input = 0;
  Shape src_offset;
  Shape dst_offset;
  Shape size;
  friend bool operator==(const SelectPiece&, const SelectPiece&) = default;
};

struct Fill {
  enum class Kind : std::uint8_t { constant, lower_triangular };
  Kind kind = Kind::constant;
  double value = 0.0;      // constant, or the value on and below the diagonal
  double value_off = 0.0;  // lower_triangular: above the diagonal (over the last two dims)
  friend bool operator==(const Fill&, const Fill&) = default;
};

// What a graph input holds between steps. Workloads say (and a graph JSON may): the
// planner keeps weights resident on the devices that read them (--weights resident)
// and its baselines split data, never weights, by batch.
enum class InputRole : std::uint8_t { unspecified, data, weight };
[[nodiscard]] std::string_view to_string(InputRole r);

// Dimensions of an input that the baselines split by (-1 = none): data-parallel splits
// the batch (then the sequence), megatron the attention heads and, between its
// tensor-parallel regions, the sequence (Megatron-LM's sequence parallelism).
struct IndexRoles {
  int batch = -1;
  int sequence = -1;
  int heads = -1;
  [[nodiscard]] bool any() const { return batch >= 0 || sequence >= 0 || heads >= 0; }
  friend bool operator==(const IndexRoles&, const IndexRoles&) = default;
};

struct Node {
  NodeKind kind = NodeKind::input;
  std::string name;
  std::vector<NodeId> inputs;
  Shape shape;  // the output shape
  DType dtype = DType::f32;
  Einsum einsum;                   // kind == einsum
  std::vector<SelectPiece> pieces;  // kind == select
  Fill fill;                        // kind == fill
  InputRole role = InputRole::unspecified;  // kind == input only
  IndexRoles index_roles;                   // kind == input only
  friend bool operator==(const Node&, const Node&) = default;
};

class Graph {
 public:
  [[nodiscard]] std::size_t size() const { return nodes_.size(); }
  [[nodiscard]] const Node& node(NodeId id) const { return nodes_.at(id.index()); }
  [[nodiscard]] const std::vector<Node>& nodes() const { return nodes_; }
  [[nodiscard]] std::vector<NodeId> ids() const;
  [[nodiscard]] std::vector<NodeId> inputs() const;   // nodes of kind input
  [[nodiscard]] std::vector<NodeId> outputs() const;  // nodes of kind output
  [[nodiscard]] std::optional<NodeId> find(std::string_view name) const;
  // Throws Error naming the node when no node has that name.
  [[nodiscard]] NodeId at(std::string_view name) const;
  // Consumers of each node, in id order.
  [[nodiscard]] std::vector<std::vector<NodeId>> consumers() const;

  // The shape a partition of this node splits: the join shape of an einsum, the output
  // shape of every other kind.
  [[nodiscard]] Shape join_shape(NodeId id) const;
  // How many leading join indices are output indices.
  [[nodiscard]] int out_rank(NodeId id) const;

  // Adding nodes checks every edge and throws Error naming the node.
  NodeId add(Node node);
  // Marks input `id` as data or weight, with the dimensions its roles name. Error naming
  // the node when it is no input or a role names a dimension it does not have.
  void annotate(NodeId id, InputRole role, IndexRoles roles = {});

  friend bool operator==(const Graph&, const Graph&) = default;

 private:
  void check(const Node& n) const;
  std::vector<Node> nodes_;
};

// Which inputs hold weights: those annotated so; in a graph that annotates none of its
// inputs, every input but the first (the data, by the convention of hand-written
// graphs). Indexed by NodeId; false for every other node.
[[nodiscard]] std::vector<bool> weight_inputs(const Graph& g);

// Fluent construction. Node names default to "<kind><id>" and must be unique.
class GraphBuilder {
 public:
  explicit GraphBuilder(DType dtype = DType::f32) : dtype_(dtype) {}

  NodeId input(std::string name, Shape shape);
  // numpy-style einsum; join defaults to the product, agg to sum where indices vanish.
  NodeId einsum(std::string_view subscripts, const std::vector<NodeId>& args, std::string_view join = {},
                std::optional<Agg> agg = std::nullopt, std::string name = {});
  // Elementwise function of same-shaped tensors: map("silu(x0)", {x}).
  NodeId map(std::string_view join, const std::vector<NodeId>& args, std::string name = {});
  NodeId map(std::string_view join, NodeId arg, std::string name = {}) { return map(join, std::vector{arg}, name); }
  // Reduction by subscripts: reduce("ij->i", x, Agg::max).
  NodeId reduce(std::string_view subscripts, NodeId arg, Agg agg, std::string name = {});
  NodeId matmul(NodeId a, NodeId b, std::string name = {});
  NodeId slice(NodeId arg, Shape offset, Shape size, std::string name = {});
  NodeId concat(const std::vector<NodeId>& args, int dim, std::string name = {});
  NodeId constant(Shape shape, double value, std::string name = {});
  // value on and below the diagonal of the last two dims, value_off above (causal mask).
  NodeId lower_triangular(Shape shape, double value, double value_off, std::string name = {});
  NodeId output(NodeId arg, std::string name = {});
  // An input that holds a weight (InputRole::weight), and annotate() as Graph's.
  NodeId weight(std::string name, Shape shape, IndexRoles roles = {});
  void annotate(NodeId id, InputRole role, IndexRoles roles = {}) { graph_.annotate(id, role, roles); }

  [[nodiscard]] const Graph& graph() const { return graph_; }
  [[nodiscard]] Graph build() const { return graph_; }
  [[nodiscard]] const Shape& shape(NodeId id) const { return graph_.node(id).shape; }

 private:
  std::string name_or_default(std::string name, std::string_view kind) const;
  NodeId add(Node n);
  DType dtype_;
  Graph graph_;
};

}  // namespace tessel

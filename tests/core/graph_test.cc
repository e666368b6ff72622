#include "core/graph.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "core/workloads.h"
#include "tests/support/error_of.h"

namespace tessel {
namespace {

using testing::error_of;

TEST(Graph, EveryBuiltInWorkloadRoundTripsThroughJson) {
  for (const char* w : {"chain", "chain-sum:skewed=1", "ffn", "llama-block", "llama-block:model=7b,batch=2"}) {
    Graph g = build_workload(w);
    Graph back = graph_from_json(nlohmann::json::parse(to_json(g).dump()), w);
    EXPECT_EQ(back, g) << w;
  }
}

TEST(Graph, ShapesAreCheckedOnEveryEdge) {
  GraphBuilder b;
  auto x = b.input("x", {4, 3});
  auto y = b.input("y", {5, 2});
  EXPECT_NE(error_of([&] { b.einsum("ij,jk->ik", {x, y}); }).find("index 'j' has size 3 elsewhere but 5"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.map("add(x0,x1)", {x, y}); }).find("operand 1"), std::string::npos);
  EXPECT_NE(error_of([&] { b.input("x", {1}); }).find("node 'x' (input): the name is already used"), std::string::npos);
  EXPECT_NE(error_of([&] { b.concat({x, y}, 0); }).find("differs off dimension 0"), std::string::npos);
  EXPECT_NE(error_of([&] { b.slice(x, {3, 0}, {2, 3}); }).find("reaches outside its input"), std::string::npos);
  EXPECT_NE(error_of([&] { b.input("bad", {0, 3}); }).find("non-positive size"), std::string::npos);
}

TEST(Graph, SelectPiecesMustTileTheOutputExactly) {
  Graph g;
  Node in{NodeKind::input, "x", {}, {4}, DType::f32, {}, {}, {}, InputRole::unspecified, {}};
  NodeId x = g.add(in);
  Node sel{NodeKind::select, "s", {x}, {4}, DType::f32, {}, {}, {}, InputRole::unspecified, {}};
  sel.pieces = {SelectPiece{0, {0}, {0}, {2}}};  // covers half
  EXPECT_NE(error_of([&] { g.add(sel); }).find("pieces cover 2 of 4 elements"), std::string::npos);
  sel.pieces = {SelectPiece{0, {0}, {0}, {3}}, SelectPiece{0, {0}, {2}, {2}}};  // overlap
  EXPECT_NE(error_of([&] { g.add(sel); }).find("overlaps an earlier piece"), std::string::npos);
}

TEST(Graph, MalformedJsonNamesTheNodeAndField) {
  auto bad = [](const char* text) {
    return error_of([&] { (void)graph_from_json(nlohmann::json::parse(text), "g.json"); });
  };
  EXPECT_NE(bad(R"({"nodes": [{"kind": "input", "shape": [2]}]})").find("g.json: node 0: missing field \"name\""),
            std::string::npos);
  EXPECT_NE(bad(R"({"nodes": [{"name": "x", "kind": "blob"}]})").find("unknown kind 'blob'"), std::string::npos);
  EXPECT_NE(bad(R"({"nodes": [{"name": "x", "kind": "input", "shape": [2, "a"]}]})").find("expected integer sizes"),
            std::string::npos);
  EXPECT_NE(bad(R"({"nodes": [{"name": "y", "kind": "einsum", "inputs": ["x"], "einsum": "i->i"}]})")
                .find("input 'x' is not an earlier node"),
            std::string::npos);
  EXPECT_NE(bad(R"({"nodes": [{"name": "x", "kind": "input", "shape": [2, 3]},
                             {"name": "y", "kind": "einsum", "inputs": ["x"], "einsum": "ij->i", "agg": "avg"}]})")
                .find("node 1 ('y'): agg: unknown aggregation 'avg'"),
            std::string::npos);
}

TEST(Graph, BuilderReadsLikeTheMath) {
  GraphBuilder g;
  auto x = g.input("x", {8, 4});
  auto w = g.input("w", {4, 2});
  auto y = g.map("relu(x0)", g.matmul(x, w));
  auto m = g.reduce("ij->i", y, Agg::max);
  g.output(m, "out");
  Graph graph = g.build();
  EXPECT_EQ(graph.node(graph.at("out")).shape, (Shape{8}));
  EXPECT_EQ(graph.inputs().size(), 2u);
  EXPECT_EQ(graph.outputs().size(), 1u);
  EXPECT_EQ(graph.consumers()[x.index()].size(), 1u);
}

}  // namespace
}  // namespace tessel

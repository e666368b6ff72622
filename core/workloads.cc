#include "core/workloads.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "core/checked.h"
#include "core/error.h"

namespace tessel {
namespace {

// Parameters of one build call: typed access with defaults and checks.
class Params {
 public:
  Params(const WorkloadInfo& info, std::map<std::string, std::string> given) : info_(info), given_(std::move(given)) {
    for (const auto& [k, v] : given_) {
      bool known = false;
      for (const auto& p : info_.params) known = known || p.name == k;
      if (!known) {
        std::string names;
        for (const auto& p : info_.params) names += (names.empty() ? "" : ", ") + p.name;
        fail("workload '", info_.name, "': unknown parameter '", k, "' (parameters: ", names, ")");
      }
    }
  }
  [[nodiscard]] std::string str(const std::string& key) const {
    if (auto it = given_.find(key); it != given_.end()) return it->second;
    for (const auto& p : info_.params)
      if (p.name == key) return p.default_value;
    return {};
  }
  [[nodiscard]] bool given(const std::string& key) const { return given_.count(key) != 0; }
  [[nodiscard]] std::int64_t integer(const std::string& key, std::int64_t fallback = -1) const {
    std::string s = str(key);
    if (s.empty()) return fallback;
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v <= 0)
      fail("workload '", info_.name, "': parameter ", key, "=", s, " is not a positive integer");
    return v;
  }
  [[nodiscard]] bool flag(const std::string& key) const {
    std::string s = str(key);
    if (s == "1" || s == "true" || s == "yes") return true;
    if (s == "0" || s == "false" || s == "no" || s.empty()) return false;
    fail("workload '", info_.name, "': parameter ", key, "=", s, " is not a boolean (0/1)");
  }
  [[nodiscard]] DType dtype() const { return parse_dtype(str("dtype"), "workload '" + info_.name + "': dtype"); }

 private:
  const WorkloadInfo& info_;
  std::map<std::string, std::string> given_;
};

Graph build_chain(const Params& p) {
  std::int64_t s = p.integer("size");
  std::int64_t m = p.integer("m", s), k = p.integer("k", s), n = p.integer("n", s), q = p.integer("p", s);
  GraphBuilder g(p.dtype());
  auto x = g.input("X", {m, k});
  auto y = g.input("Y", {k, n});
  auto z = g.input("Z", {n, q});
  // A matrix-chain experiment: every operand is data, moved where it is needed.
  for (NodeId in : {x, y, z}) g.annotate(in, InputRole::data);
  auto xy = g.einsum("mk,kn->mn", {x, y}, {}, std::nullopt, "XY");
  auto xyz = g.einsum("mn,np->mp", {xy, z}, {}, std::nullopt, "XYZ");
  g.output(xyz, "out");
  return g.build();
}

Graph build_chain_sum(const Params& p) {
  std::int64_t s = p.integer("size");
  bool skewed = p.flag("skewed");
  std::int64_t small = skewed ? std::max<std::int64_t>(1, s / 10) : s;
  std::int64_t large = skewed ? checked_mul(s, 10, "workload 'chain-sum': skewed size (10 x size)") : s;
  GraphBuilder g(p.dtype());
  auto a = g.input("A", {s, small});
  auto b = g.input("B", {small, s});
  auto c = g.input("C", {s, small});
  auto d = g.input("D", {small, large});
  auto e = g.input("E", {large, s});
  for (NodeId in : {a, b, c, d, e}) g.annotate(in, InputRole::data);  // EinDecomp's experiment: all data
  auto ab = g.einsum("ij,jk->ik", {a, b}, {}, std::nullopt, "AB");
  auto de = g.einsum("ij,jk->ik", {d, e}, {}, std::nullopt, "DE");
  auto cde = g.einsum("ij,jk->ik", {c, de}, {}, std::nullopt, "CDE");
  auto y = g.map("add(x0,x1)", {ab, cde}, "Y");
  g.output(y, "out");
  return g.build();
}

Graph build_ffn(const Params& p) {
  std::int64_t t = p.integer("tokens"), d = p.integer("dim"), h = p.integer("hidden");
  GraphBuilder g(p.dtype());
  auto x = g.input("x", {t, d});
  g.annotate(x, InputRole::data, {.sequence = 0});
  auto w1 = g.weight("w1", {d, h});
  auto w3 = g.weight("w3", {d, h});
  auto w2 = g.weight("w2", {h, d});
  auto gate = g.einsum("td,dh->th", {x, w1}, {}, std::nullopt, "gate");
  auto up = g.einsum("td,dh->th", {x, w3}, {}, std::nullopt, "up");
  auto act = g.map("mul(silu(x0),x1)", {gate, up}, "act");
  auto y = g.einsum("th,hd->td", {act, w2}, {}, std::nullopt, "down");
  g.output(y, "out");
  return g.build();
}

struct LlamaDims {
  std::int64_t dim, heads, hidden;
};

LlamaDims llama_dims(const std::string& model) {
  // LLaMA-1 dimensions (Touvron et al. 2023, table 2); hidden = the SwiGLU width.
  if (model == "tiny") return {64, 4, 172};
  if (model == "7b") return {4096, 32, 11008};
  if (model == "13b") return {5120, 40, 13824};
  if (model == "30b") return {6656, 52, 17920};
  if (model == "65b") return {8192, 64, 22016};
  fail("workload 'llama-block': unknown model '", model, "' (expected tiny, 7b, 13b, 30b or 65b)");
}

// x + attention(rmsnorm(x)), then + ffn(rmsnorm(.)). Indices: b batch, s/t sequence
// (queries / keys), d model dim, h heads, k head dim, f ffn hidden. No rotary
// embedding (it changes no shape and no communication).
Graph build_llama(const Params& p) {
  LlamaDims dims = llama_dims(p.str("model"));
  bool tiny = p.str("model") == "tiny";
  std::int64_t b = p.integer("batch", 1);
  std::int64_t s = p.integer("seq", tiny ? 16 : 1000);
  std::int64_t d = p.integer("dim", dims.dim);
  std::int64_t h = p.integer("heads", dims.heads);
  std::int64_t f = p.integer("hidden", dims.hidden);
  if (d % h != 0) fail("workload 'llama-block': dim=", d, " is not divisible by heads=", h);
  std::int64_t k = d / h;
  const std::string eps = "1e-05";
  GraphBuilder g(p.dtype());
  // The activations x are data (batch, sequence); everything else is a weight, and the
  // projections name their heads index for megatron.
  auto x = g.input("x", {b, s, d});
  g.annotate(x, InputRole::data, {.batch = 0, .sequence = 1});
  auto w_attn_norm = g.weight("attn_norm", {d});
  auto wq = g.weight("wq", {d, h, k}, {.heads = 1});
  auto wk = g.weight("wk", {d, h, k}, {.heads = 1});
  auto wv = g.weight("wv", {d, h, k}, {.heads = 1});
  auto wo = g.weight("wo", {h, k, d}, {.heads = 0});
  auto w_ffn_norm = g.weight("ffn_norm", {d});
  auto w1 = g.weight("w1", {d, f});
  auto w3 = g.weight("w3", {d, f});
  auto w2 = g.weight("w2", {f, d});

  auto rmsnorm = [&](NodeId in, NodeId w, const std::string& tag) {
    auto ss = g.einsum("bsd,bsd->bs", {in, in}, {}, Agg::sum, tag + "_sumsq");
    auto scale = g.map("rsqrt(add(mul(x0," + std::to_string(1.0 / static_cast<double>(d)) + ")," + eps + "))", ss,
                       tag + "_rsqrt");
    return g.einsum("bsd,bs,d->bsd", {in, scale, w}, "mul(mul(x0,x1),x2)", std::nullopt, tag);
  };

  auto xn = rmsnorm(x, w_attn_norm, "attn_norm_x");
  auto q = g.einsum("bsd,dhk->bshk", {xn, wq}, {}, std::nullopt, "q");
  auto kk = g.einsum("bsd,dhk->bshk", {xn, wk}, {}, std::nullopt, "k");
  auto v = g.einsum("bsd,dhk->bshk", {xn, wv}, {}, std::nullopt, "v");
  auto scores = g.einsum("bshk,bthk->bhst", {q, kk}, {}, std::nullopt, "scores");
  auto mask = g.lower_triangular({s, s}, 0.0, -std::numeric_limits<double>::infinity(), "causal_mask");
  auto masked = g.einsum("bhst,st->bhst", {scores, mask},
                         "add(mul(x0," + std::to_string(1.0 / std::sqrt(static_cast<double>(k))) + "),x1)",
                         std::nullopt, "masked");
  auto mx = g.reduce("bhst->bhs", masked, Agg::max, "softmax_max");
  auto shifted = g.einsum("bhst,bhs->bhst", {masked, mx}, "sub(x0,x1)", std::nullopt, "softmax_sub");
  auto ex = g.map("exp(x0)", shifted, "softmax_exp");
  auto sm = g.reduce("bhst->bhs", ex, Agg::sum, "softmax_sum");
  auto probs = g.einsum("bhst,bhs->bhst", {ex, sm}, "div(x0,x1)", std::nullopt, "softmax");
  auto attn = g.einsum("bhst,bthk->bshk", {probs, v}, {}, std::nullopt, "attn");
  auto proj = g.einsum("bshk,hkd->bsd", {attn, wo}, {}, std::nullopt, "attn_out");
  auto h1 = g.map("add(x0,x1)", {x, proj}, "residual1");
  auto hn = rmsnorm(h1, w_ffn_norm, "ffn_norm_x");
  auto gate = g.einsum("bsd,df->bsf", {hn, w1}, {}, std::nullopt, "gate");
  auto up = g.einsum("bsd,df->bsf", {hn, w3}, {}, std::nullopt, "up");
  auto act = g.map("mul(silu(x0),x1)", {gate, up}, "act");
  auto down = g.einsum("bsf,fd->bsd", {act, w2}, {}, std::nullopt, "down");
  auto y = g.map("add(x0,x1)", {h1, down}, "residual2");
  g.output(y, "out");
  return g.build();
}

}  // namespace

const std::vector<WorkloadInfo>& workloads() {
  static const std::vector<WorkloadInfo> list = {
      {"chain",
       "matrix chain (X·Y)·Z",
       {{"size", "256", "square size of every matrix"},
        {"m", "", "rows of X (default: size)"},
        {"k", "", "cols of X / rows of Y (default: size)"},
        {"n", "", "cols of Y / rows of Z (default: size)"},
        {"p", "", "cols of Z (default: size)"},
        {"dtype", "f32", "f16, bf16, f32 or f64"}}},
      {"chain-sum",
       "A·B + C·(D·E), EinDecomp's matrix-chain experiment",
       {{"size", "200", "S: A,B,C,D,E are S×S (square)"},
        {"skewed", "0", "1: A S×S/10, B S/10×S, C S×S/10, D S/10×10S, E 10S×S"},
        {"dtype", "f32", "f16, bf16, f32 or f64"}}},
      {"ffn",
       "SiLU-gated feed-forward layer: (silu(x·W1) ⊙ x·W3)·W2",
       {{"tokens", "256", "rows of x"},
        {"dim", "128", "model dimension"},
        {"hidden", "512", "hidden (ffn) dimension"},
        {"dtype", "f32", "f16, bf16, f32 or f64"}}},
      {"llama-block",
       "one LLaMA transformer block: RMSNorm, Q/K/V, causal softmax attention, output projection, SwiGLU FFN",
       {{"model", "tiny", "tiny (runs on a CPU), 7b, 13b, 30b, 65b"},
        {"batch", "1", "batch size"},
        {"seq", "", "sequence length (tiny: 16, others: 1000)"},
        {"dim", "", "model dimension (default: the model's)"},
        {"heads", "", "attention heads (default: the model's)"},
        {"hidden", "", "FFN hidden dimension (default: the model's)"},
        {"dtype", "f32", "f16, bf16, f32 or f64"}}},
  };
  return list;
}

std::map<std::string, std::string> parse_key_values(std::string_view text, std::string_view what) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? text.size() : comma + 1;
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      fail(what, ": expected key=value, got '", item, "'");
    std::string key(item.substr(0, eq));
    if (out.count(key)) fail(what, ": '", key, "' given twice");
    out[key] = std::string(item.substr(eq + 1));
  }
  return out;
}

Graph build_workload(std::string_view spec) {
  std::size_t colon = spec.find(':');
  std::string name(spec.substr(0, colon));
  std::string_view rest = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  for (const auto& info : workloads()) {
    if (info.name != name) continue;
    Params p(info, parse_key_values(rest, "workload '" + name + "'"));
    if (name == "chain") return build_chain(p);
    if (name == "chain-sum") return build_chain_sum(p);
    if (name == "ffn") return build_ffn(p);
    if (name == "llama-block") return build_llama(p);
  }
  std::string names;
  for (const auto& info : workloads()) names += (names.empty() ? "" : ", ") + info.name;
  fail("unknown workload '", name, "' (built-in: ", names, ")");
}

}  // namespace tessel

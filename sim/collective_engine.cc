// The generated form of a collective node: the expanded form's tasks, made as they become
// ready (collective_engine.h).
#include "sim/collective_engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "core/checked.h"
#include "core/collective_rewrite.h"
#include "core/error.h"
#include "core/ready_order.h"
#include "sim/collective_symmetry.h"
#include "sim/collectives.h"
#include "sim/compute_model.h"
#include "sim/event_queue.h"
#include "sim/network.h"

namespace tessel::sim {
namespace {

// A generated task, named by a code the program computes (its position in the expanded
// form's structure), never stored beyond the tasks in flight.
using Code = std::uint64_t;
enum class Kind : std::uint8_t { move, touch };
struct Gen {
  Kind kind = Kind::move;
  std::int32_t dev = 0;        // where it runs (a move's sender)
  std::int32_t dst = 0;        // a move's receiver
  std::int64_t elements = 0;   // of the region moved or accumulated
  std::uint64_t key = 0;       // lane priority: smaller first
};

// The expanded form's structure, implicitly. A program names every task by a code and
// gives, for a code, the task, how many dependencies it has and its successors. Tasks
// ready from the start come either as initial() codes or as streams: per rank, sequences
// of ready tasks in priority order, fed to their lane one at a time (so that n ranks × n
// steps of ready sends cost n entries, not n²).
class Program {
 public:
  virtual ~Program() = default;
  [[nodiscard]] virtual Gen task(Code c) const = 0;
  [[nodiscard]] virtual int deps(Code c) const = 0;
  virtual void successors(Code c, std::vector<Code>& out) const = 0;
  virtual void initial(std::vector<Code>& out) const = 0;
  // Streams per rank, and the task at position `idx` of stream `s` of rank `r` (false past its end).
  [[nodiscard]] virtual int streams() const { return 0; }
  [[nodiscard]] virtual bool stream_task(int /*r*/, int /*s*/, std::int64_t /*idx*/, Code& /*c*/) const { return false; }
  // For a task with two dependencies one of which is a stream's task: that rank, stream
  // and position. Stream tasks on a copy lane finish in stream order, so "done" is a
  // position below the stream's count of finished tasks, and nothing is stored for a
  // task whose stream dependency finishes first (the B touches run far ahead).
  [[nodiscard]] virtual bool stream_dep(Code /*c*/, int& /*r*/, int& /*s*/, std::int64_t& /*pos*/) const { return false; }
  // A stream that is not fed from the start: a code among successors that opens it once
  // its dependencies are done (no task of its own: not counted, not timed).
  [[nodiscard]] virtual bool stream_open_at_start(int /*s*/) const { return true; }
  [[nodiscard]] virtual bool opens(Code /*c*/, int& /*r*/, int& /*s*/) const { return false; }
  // Shifting ranks by `period` (collective_symmetry.h): whether it maps every task onto a
  // task of the same size and order (false: never reduced), the ranks r sends to, and a
  // code's image on ranks 0..period−1.
  [[nodiscard]] virtual bool periodic(int /*period*/) const { return false; }
  virtual void peers(int /*r*/, std::vector<int>& /*out*/) const {}
  [[nodiscard]] virtual Code canonical(Code c, int /*period*/) const { return c; }
};

// Undisturbed duration of an accumulating touch of `elements` on a device of type `dt`, as
// the compute model times the expanded form's touches.
SimTime accumulate_ps(const DeviceType& dt, std::int64_t elements, DType dtype) {
  TaskGraph tg;  // one buffer, for the compute model's dtype lookup
  tg.buffers.push_back(Buffer{DeviceId(0), Shape{1}, dtype, Agg::sum, NodeId(0)});
  Task t;
  t.kind = TaskKind::touch;
  t.op = TouchOp::accumulate;
  t.agg = Agg::sum;
  t.writes = BufferId(0);
  t.src.rank = 1;
  t.src.size[0] = elements;
  t.dst = t.src;
  t.flops = static_cast<double>(elements);
  t.bytes = elements * dtype_bytes(dtype);
  const SimTime ps = to_sim_time(compute_seconds(t, tg, dt));
  if (ps >= kMaxSimTime) fail("simulate: a touch of the collective alone would pass the simulator's clock limit");
  return ps;
}

// Undisturbed duration of a move of `bytes` from `a` to `b`: its route's latency and its
// bytes at the route's slowest link (RouteTable::add's entry; the expanded form's rank).
SimTime move_ps(const Machine& m, int a, int b, std::int64_t bytes) {
  RouteTable table;
  const std::int32_t r = table.add(m, m.route(DeviceId(a), DeviceId(b)));
  return add_sim_time(table.latency(r), bytes > 0 ? to_sim_time(static_cast<double>(bytes) / table.bytes_per_s(r)) : 0);
}

// The order in which a rank's pieces and steps compete for one lane, as longest-path
// priority orders them in the expanded form of these symmetric programs: pieces grouped
// by how many later pieces they release through the window (most first),
// then the earlier step, then the earlier piece. Without a window, one group.
struct PieceOrder {
  int pieces = 1;
  int steps = 1;  // of the whole program, across its phases (the key's step range)
  bool windowed = true;
  int window = kPiecesInFlight;  // pieces in flight (CollectiveSpec::ring_window)

  [[nodiscard]] int most() const { return windowed ? (pieces - 1) / window : 0; }
  [[nodiscard]] int chained(int j) const { return windowed ? (pieces - 1 - j) / window : 0; }
  // Lane priority of piece j's step s: smaller first; `sub` (0..3) orders the tasks of one
  // step and piece.
  [[nodiscard]] std::uint64_t key(int j, int s, std::uint64_t sub) const {
    const auto group = static_cast<std::uint64_t>(most() - chained(j));
    return (((group * static_cast<std::uint64_t>(steps) + static_cast<std::uint64_t>(s)) * static_cast<std::uint64_t>(pieces) +
             static_cast<std::uint64_t>(j))
            << 2) |
           sub;
  }
  // The tasks (j, s), s in [0, count), of a stream in key order: the one at `idx` (false
  // past the end), and the position of (j, s).
  [[nodiscard]] bool at(std::int64_t idx, int count, int& j, int& s) const {
    for (int c = most(); c >= 0; --c) {
      const int lo = windowed ? std::max(0, pieces - window * (c + 1)) : 0;
      const int hi = windowed ? pieces - 1 - window * c : pieces - 1;  // inclusive
      const std::int64_t group = static_cast<std::int64_t>(count) * (hi - lo + 1);
      if (idx >= group) {
        idx -= group;
        continue;
      }
      j = lo + static_cast<int>(idx % (hi - lo + 1));
      s = static_cast<int>(idx / (hi - lo + 1));
      return true;
    }
    return false;
  }
  [[nodiscard]] std::int64_t position(int j, int s, int count) const {
    std::int64_t pos = 0;
    for (int c = most(); c >= 0; --c) {
      const int lo = windowed ? std::max(0, pieces - window * (c + 1)) : 0;
      const int hi = windowed ? pieces - 1 - window * c : pieces - 1;
      if (j > hi) {
        pos += static_cast<std::int64_t>(count) * (hi - lo + 1);
        continue;
      }
      return pos + static_cast<std::int64_t>(s) * (hi - lo + 1) + (j - lo);
    }
    return pos;
  }
};

// Ring reduce-scatter, all-gather or all-reduce over ranks 0..m−1 in `slices` pieces, as
// collective_task_graph builds it. Steps s = 0..S−1 (all-reduce: m − 1 reduce-scatter
// steps, then m − 1 all-gather steps). In step s position i sends one chunk to i + 1;
// in a reduce-scatter step the receiver accumulates what arrived (touch A, after the
// move) and its own data (touch B, ready from the start) into a fresh buffer, which the
// next step sends. Code ((j · S + s) · m + i) · 3 + sub: sub 0 the move sent by i, 1 and
// 2 touches A and B on receiver i.
class Ring final : public Program {
 public:
  explicit Ring(const CollectiveSpec& s) : c_(s.collective), m_(s.ranks), p_(s.slices), w_(s.ring_window) {
    elements_ = s.bytes / dtype_bytes(s.dtype);
    steps_ = c_ == Collective::allreduce ? 2 * (m_ - 1) : m_ - 1;
    touch_steps_ = c_ == Collective::allgather ? 0 : m_ - 1;
    order_ = PieceOrder{p_, steps_, windowed(), w_};
    // Per piece, the size of every chunk where all are equal (-1: they differ), so that
    // task() needs no split_point in the common case.
    even_.assign(static_cast<std::size_t>(p_), -1);
    for (int j = 0; j < p_; ++j) {
      if (c_ == Collective::allgather) {
        if (elements_ % m_ == 0) even_[static_cast<std::size_t>(j)] = slice(elements_ / m_, j).second;
      } else {
        const std::int64_t piece = slice(elements_, j).second;
        if (piece % m_ == 0) even_[static_cast<std::size_t>(j)] = piece / m_;
      }
    }
  }

  Gen task(Code code) const override {
    const int sub = static_cast<int>(code % 3);
    Code rest = code / 3;
    const int i = static_cast<int>(rest % static_cast<Code>(m_));
    rest /= static_cast<Code>(m_);
    const int s = static_cast<int>(rest % static_cast<Code>(steps_));
    const int j = static_cast<int>(rest / static_cast<Code>(steps_));
    Gen g;
    const int sender = sub == 0 ? i : (i == 0 ? m_ - 1 : i - 1);
    const std::int64_t even = even_[static_cast<std::size_t>(j)];
    g.elements = even >= 0 ? even : chunk_elements(j, s, sender);
    g.key = order_.key(j, s, static_cast<std::uint64_t>(sub));
    if (sub == 0) {
      g.kind = Kind::move;
      g.dev = i;
      g.dst = i + 1 == m_ ? 0 : i + 1;
    } else {
      g.kind = Kind::touch;
      g.dev = g.dst = i;
    }
    return g;
  }

  int deps(Code code) const override {
    const int sub = static_cast<int>(code % 3);
    if (sub != 0) return sub == 1 ? 1 : 0;
    const Code rest = code / 3 / static_cast<Code>(m_);
    const int s = static_cast<int>(rest % static_cast<Code>(steps_));
    const int j = static_cast<int>(rest / static_cast<Code>(steps_));
    if (s == 0) return windowed() && j >= w_ ? 1 : 0;
    return s - 1 < touch_steps_ ? 2 : 1;
  }

  void successors(Code code, std::vector<Code>& out) const override {
    const int sub = static_cast<int>(code % 3);
    Code rest = code / 3;
    const int i = static_cast<int>(rest % static_cast<Code>(m_));
    rest /= static_cast<Code>(m_);
    const int s = static_cast<int>(rest % static_cast<Code>(steps_));
    const int j = static_cast<int>(rest / static_cast<Code>(steps_));
    if (sub != 0) {  // a touch feeds its rank's next send
      if (s + 1 < steps_) out.push_back(make(j, s + 1, i, 0));
      return;
    }
    const int to = i + 1 == m_ ? 0 : i + 1;
    if (s < touch_steps_) {
      out.push_back(make(j, s, to, 1));
    } else if (s + 1 < steps_) {
      out.push_back(make(j, s + 1, to, 0));
    }
    // The last move into `to` of piece j releases `to`'s first send of piece j + w_.
    if (windowed() && s == steps_ - 1 && j + w_ < p_) out.push_back(make(j + w_, 0, to, 0));
  }

  void initial(std::vector<Code>& out) const override {
    if (m_ < 2) return;
    const int first = windowed() ? std::min(p_, w_) : p_;
    for (int j = 0; j < first; ++j)
      for (int i = 0; i < m_; ++i) out.push_back(make(j, 0, i, 0));
  }

  bool stream_dep(Code code, int& r, int& st, std::int64_t& pos) const override {
    if (code % 3 != 0 || touch_steps_ == 0) return false;
    Code rest = code / 3;
    const int i = static_cast<int>(rest % static_cast<Code>(m_));
    rest /= static_cast<Code>(m_);
    const int s = static_cast<int>(rest % static_cast<Code>(steps_));
    const int j = static_cast<int>(rest / static_cast<Code>(steps_));
    if (s == 0 || s - 1 >= touch_steps_) return false;
    r = i;  // B(j, s − 1, i)
    st = 0;
    pos = order_.position(j, s - 1, touch_steps_);
    return true;
  }

  // Rank i's tasks are rank i + period's when every chunk index c has the size of c + period
  // (the sizes differ only where a piece does not split evenly over the ranks); priority
  // keys do not depend on the rank.
  bool periodic(int period) const override {
    if (period < 1 || m_ % period != 0) return false;
    auto even = [&](std::int64_t length) {
      if (length % m_ == 0) return true;
      for (int c = period; c < m_; ++c)
        if (chunk_length(c, length) != chunk_length(c % period, length))
          return false;
      return true;
    };
    if (c_ == Collective::allgather) return even(elements_);
    for (int j = 0; j < p_; ++j)
      if (!even(slice(elements_, j).second)) return false;
    return true;
  }
  void peers(int r, std::vector<int>& out) const override { out.push_back(mod(r + 1)); }
  Code canonical(Code code, int period) const override {
    const int i = static_cast<int>(code / 3 % static_cast<Code>(m_));
    return code - static_cast<Code>(i - i % period) * 3;
  }

  // One stream per rank: its B touches, step by step, piece by piece.
  int streams() const override { return touch_steps_ > 0 && m_ > 1 ? 1 : 0; }
  bool stream_task(int r, int /*s*/, std::int64_t idx, Code& c) const override {
    int j = 0, s = 0;
    if (!order_.at(idx, touch_steps_, j, s)) return false;
    c = make(j, s, r, 2);
    return true;
  }

 private:
  [[nodiscard]] bool windowed() const { return c_ != Collective::allgather; }  // as collective_task_graph bounds pieces
  [[nodiscard]] int mod(int v) const { return ((v % m_) + m_) % m_; }
  [[nodiscard]] Code make(int j, int s, int i, int sub) const {
    return ((static_cast<Code>(j) * static_cast<Code>(steps_) + static_cast<Code>(s)) * static_cast<Code>(m_) +
            static_cast<Code>(i)) * 3 + static_cast<Code>(sub);
  }
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> slice(std::int64_t total, int j) const {
    const std::int64_t a = split_point(j, total, p_), z = split_point(j + 1, total, p_);
    return {a, z - a};
  }
  // Elements of the chunk `sender` sends in step s of piece j.
  [[nodiscard]] std::int64_t chunk_elements(int j, int s, int sender) const {
    if (c_ == Collective::allgather) {  // piece j of rank chunk (sender − s)
      const int c = mod(sender - s);
      return slice(chunk_length(c, elements_), j).second;
    }
    const std::int64_t piece = slice(elements_, j).second;
    const int c = s < m_ - 1 ? mod(sender - s) : mod(sender + 1 - (s - (m_ - 1)));
    return chunk_length(c, piece);
  }
  // Elements of chunk c when `length` elements split over the m_ ranks (chunk_elements,
  // and periodic(), which compares chunk sizes the same way).
  [[nodiscard]] std::int64_t chunk_length(int c, std::int64_t length) const {
    return split_point(c + 1, length, m_) - split_point(c, length, m_);
  }

  Collective c_;
  int m_, p_, w_;  // w_: pieces in flight (CollectiveSpec::ring_window)
  std::int64_t elements_ = 0;
  int steps_ = 0, touch_steps_ = 0;
  PieceOrder order_;
  std::vector<std::int64_t> even_;
};

// Pairwise all-to-all. One level (ranks_per_node 0): in step k = 1..n−1 rank i sends its
// block for rank i + k, at most `window` in flight (step k after step k − window), or all
// posted at once (window 0: one stream per rank). Two levels (g ranks per node): every
// send posted at once, in two streams per rank — intra-node steps j = 1..g−1 to (q, l + j),
// then inter-node steps (d, t) to (q + d, l + t), numbered g + (d − 1)·g + t. Code k·n + i.
class Pairwise final : public Program {
 public:
  explicit Pairwise(const CollectiveSpec& s) : n_(s.ranks), w_(s.window), g_(s.ranks_per_node) {
    elements_ = s.bytes / dtype_bytes(s.dtype);
    if (g_ >= n_) g_ = 0;  // one node: one level
  }

  Gen task(Code code) const override {
    const int i = static_cast<int>(code % static_cast<Code>(n_));
    const int k = static_cast<int>(code / static_cast<Code>(n_));
    Gen g;
    g.kind = Kind::move;
    g.dev = i;
    g.dst = to(i, k);
    g.elements = split_point(g.dst + 1, elements_, n_) - split_point(g.dst, elements_, n_);
    g.key = static_cast<std::uint64_t>(k);
    return g;
  }
  int deps(Code code) const override {
    if (g_ > 0 || w_ == 0) return 0;
    const int k = static_cast<int>(code / static_cast<Code>(n_));
    return k - w_ >= 1 ? 1 : 0;
  }
  void successors(Code code, std::vector<Code>& out) const override {
    if (g_ > 0 || w_ == 0) return;
    const int k = static_cast<int>(code / static_cast<Code>(n_));
    if (k + w_ < n_) out.push_back(code + static_cast<Code>(w_) * static_cast<Code>(n_));
  }
  void initial(std::vector<Code>& out) const override {
    if (g_ > 0 || w_ == 0) return;
    for (int k = 1; k <= std::min(w_, n_ - 1); ++k)
      for (int i = 0; i < n_; ++i) out.push_back(static_cast<Code>(k) * static_cast<Code>(n_) + static_cast<Code>(i));
  }
  int streams() const override { return g_ > 0 ? 2 : w_ == 0 ? 1 : 0; }
  bool stream_task(int r, int s, std::int64_t idx, Code& c) const override {
    std::int64_t k = 0;
    if (g_ == 0) {
      k = 1 + idx;
      if (k >= n_) return false;
    } else if (s == 0) {
      k = 1 + idx;
      if (k >= g_) return false;
    } else {
      k = g_ + idx;
      if (k >= n_) return false;
    }
    c = static_cast<Code>(k) * static_cast<Code>(n_) + static_cast<Code>(r);
    return true;
  }

 private:
  [[nodiscard]] int to(int i, int k) const { return stagger_peer(i, k, StaggerLayout{n_, g_}); }

  int n_, w_, g_;
  std::int64_t elements_ = 0;
};

// Hierarchical all-reduce over n ranks, g per node (numbered node by node), N = n/g nodes,
// as collective_task_graph builds it. Per piece j:
//   phase 0  ring reduce-scatter inside every node: in step k = 0..g−2 local position l
//            sends intra chunk (l − k) mod g to l + 1, which accumulates what arrived
//            (touch A) and its own data (touch B, ready from the start) into a fresh
//            buffer; position l ends with intra chunk (l + 1) mod g;
//   phase 1  along every rail (the ranks of one local position), a ring reduce-scatter of
//            that chunk in N rail chunks (N − 1 steps; its B touches read phase 0's result);
//   phase 2  along every rail, a ring all-gather (N − 1 steps; rail position q starts with
//            rail chunk (q + 1) mod N);
//   phase 3  ring all-gather inside every node of the N rail chunks each rank holds, one
//            move per rail chunk (the expanded form keeps them in N buffers), each sent
//            as soon as it has arrived.
// Each phase bounds the pieces in flight on its own (Builder::bound_pieces): a rank's first
// send of piece j in a phase waits for the last move of piece j − W into it in that phase
// (W = kPiecesInFlight in phases 0 and 3, CollectiveSpec::rail_window in phases 1 and 2)
// — in phase 3 only the send of rail chunk 0, as the expanded form orders it.
// With one rank per node (g = 1) phases 0 and 3 are empty: a ring over the nodes.
// Code j·T + the phase's offset + (k·n + r)·3 + sub (phases 0 and 1: sub 0 the move r
// sends, 1 and 2 touches A and B on receiver r), + k·n + r (phase 2: the move r sends),
// + (k·n + r)·N + c (phase 3: rail chunk c sent by r). On one lane of one rank, code order
// is the expanded form's task order.
//
// Priority: the expanded form's own, the longest undisturbed path from a task to the end,
// computed in closed form. Along a chain of one chunk (a ring's steps) the path adds the
// steps' durations; it branches only where a phase ends and where a window releases the
// next piece, so per piece a table over (rail, rail chunk) and two over ranks hold
// everything (P·n entries each). Durations are taken on rank 0's routes (the intra-node
// hop 0 → 1, the rail hop 0 → g) and the device type of rank 0: exact where every rank's
// hops are timed alike (cluster: and fat-tree presets; not rail: with group > 1);
// elsewhere a priority close to it.
class Hierarchical final : public Program {
 public:
  Hierarchical(const CollectiveSpec& s, const Machine& m)
      : n_(s.ranks), g_(s.ranks_per_node), p_(s.slices), w1_(s.rail_window) {
    nodes_ = n_ / g_;
    const auto n = static_cast<Code>(n_);
    size_[0] = static_cast<Code>(g_ - 1) * n * 3;
    size_[1] = static_cast<Code>(nodes_ - 1) * n * 3;
    size_[2] = static_cast<Code>(nodes_ - 1) * n;
    size_[3] = static_cast<Code>(g_ - 1) * n * static_cast<Code>(nodes_);
    for (int ph = 0; ph < 3; ++ph) off_[ph + 1] = off_[ph] + size_[ph];
    per_piece_ = off_[3] + size_[3];
    opener0_ = static_cast<Code>(p_) * per_piece_;
    // Elements of intra chunk x of piece j (the whole piece with one rank per node).
    const std::int64_t elements = s.bytes / dtype_bytes(s.dtype);
    intra_.resize(static_cast<std::size_t>(p_) * static_cast<std::size_t>(g_));
    for (int j = 0; j < p_; ++j) {
      const std::int64_t piece = split_point(j + 1, elements, p_) - split_point(j, elements, p_);
      for (int x = 0; x < g_; ++x) intra_[index(j, x)] = part(x, piece, g_);
    }
    ranks(s, m);
  }

  Gen task(Code code) const override {
    const At a = at(code);
    const int l = a.r % g_, q = a.r / g_;
    Gen g;
    const bool move = a.ph >= 2 || a.sub == 0;
    g.kind = move ? Kind::move : Kind::touch;
    g.dev = a.r;
    g.dst = move ? (a.ph == 0 || a.ph == 3 ? intra_next(a.r) : rail_next(a.r)) : a.r;
    switch (a.ph) {
      case 0: {
        const int sender = move ? l : mod(l - 1, g_);
        g.elements = intra_[index(a.j, mod(sender - a.k, g_))];
        break;
      }
      case 1: {
        const int sender = move ? q : mod(q - 1, nodes_);
        g.elements = part(mod(sender - a.k, nodes_), rail_length(a.j, l), nodes_);
        break;
      }
      case 2: g.elements = part(mod(q + 1 - a.k, nodes_), rail_length(a.j, l), nodes_); break;
      default: g.elements = part(a.sub, intra_[index(a.j, mod(l + 1 - a.k, g_))], nodes_); break;
    }
    g.key = static_cast<std::uint64_t>(kMaxSimTime - rank(a));  // the longest path first
    return g;
  }

  int deps(Code code) const override {
    if (code >= opener0_) return 2;  // phase 0's last touches A and B
    const At a = at(code);
    const int window = a.j >= kPiecesInFlight ? 1 : 0;
    switch (a.ph) {
      case 0: return a.sub == 1 ? 1 : a.sub == 2 ? 0 : a.k == 0 ? window : 2;
      case 1:
        if (a.sub == 1) return 1;
        if (a.sub == 2) return g_ > 1 ? 2 : 0;
        return a.k == 0 ? (g_ > 1 ? 2 : 0) + (a.j >= w1_ ? 1 : 0) : 2;
      case 2: return a.k == 0 ? 2 : 1;
      default:
        if (a.k > 0) return 1;
        return (a.sub == mod(a.r / g_ + 1, nodes_) ? 2 : 1) + (a.sub == 0 ? window : 0);
    }
  }

  void successors(Code code, std::vector<Code>& out) const override {
    const At a = at(code);
    const int j = a.j, k = a.k, r = a.r, q = r / g_;
    const bool next_piece = j + kPiecesInFlight < p_;
    switch (a.ph) {
      case 0:
        if (a.sub == 0) {
          out.push_back(make(j, 0, k, intra_next(r), 1));
          if (k == g_ - 2 && next_piece) out.push_back(make(j + kPiecesInFlight, 0, 0, intra_next(r), 0));
        } else if (k < g_ - 2) {
          out.push_back(make(j, 0, k + 1, r, 0));
        } else {  // r's intra chunk is reduced: its rail's reduce-scatter reads it
          out.push_back(make(j, 1, 0, r, 0));
          out.push_back(opener0_ + static_cast<Code>(j) * static_cast<Code>(n_) + static_cast<Code>(r));  // its B touches
        }
        return;
      case 1:
        if (a.sub == 0) {
          out.push_back(make(j, 1, k, rail_next(r), 1));
        } else if (k < nodes_ - 2) {
          out.push_back(make(j, 1, k + 1, r, 0));
        } else {  // r's rail chunk is reduced
          out.push_back(make(j, 2, 0, r, 0));
          if (g_ > 1) out.push_back(make(j, 3, 0, r, mod(q + 1, nodes_)));
        }
        return;
      case 2: {
        const int to = rail_next(r);
        if (k < nodes_ - 2) out.push_back(make(j, 2, k + 1, to, 0));
        if (g_ > 1) out.push_back(make(j, 3, 0, to, mod(q + 1 - k, nodes_)));
        if (k == nodes_ - 2 && j + w1_ < p_) out.push_back(make(j + w1_, 1, 0, to, 0));
        return;
      }
      default: {
        const int to = intra_next(r);
        if (k < g_ - 2) out.push_back(make(j, 3, k + 1, to, a.sub));
        if (k == g_ - 2 && a.sub == nodes_ - 1 && next_piece) out.push_back(make(j + kPiecesInFlight, 3, 0, to, 0));
        return;
      }
    }
  }

  // The first sends of the pieces the first window holds (phase 0's, or with one rank per
  // node the rail's); B touches come as streams.
  void initial(std::vector<Code>& out) const override {
    for (int j = 0; j < std::min(p_, g_ > 1 ? kPiecesInFlight : w1_); ++j)
      for (int r = 0; r < n_; ++r) out.push_back(g_ > 1 ? make(j, 0, 0, r, 0) : make(j, 1, 0, r, 0));
  }

  // Streams per rank, each in priority order (then code order), each task fed when the one
  // before it starts: with g > 1 stream 0 the phase-0 B touches (they read the rank's own
  // data: ready from the start), and stream 1 + j piece j's phase-1 B touches, opened when
  // the rank's phase 0 of piece j is done (their order depends on the rank: a table of
  // N − 1 steps per rank and piece, 2 bytes each). With one rank per node one stream, the
  // phase-1 B touches of every piece, ready from the start, in rank 0's order (the same
  // for every rank where the pieces split evenly over the nodes; elsewhere close to it).
  int streams() const override { return g_ > 1 ? 1 + p_ : 1; }
  bool stream_open_at_start(int s) const override { return s == 0; }
  bool opens(Code code, int& r, int& s) const override {
    if (code < opener0_) return false;
    const Code x = code - opener0_;
    r = static_cast<int>(x % static_cast<Code>(n_));
    s = 1 + static_cast<int>(x / static_cast<Code>(n_));
    return true;
  }
  bool stream_task(int r, int s, std::int64_t idx, Code& c) const override {
    const int steps = nodes_ - 1;
    if (g_ == 1) {
      if (idx >= static_cast<std::int64_t>(stream_order_.size())) return false;
      const std::int32_t jk = stream_order_[static_cast<std::size_t>(idx)];
      c = make(jk / steps, 1, jk % steps, r, 2);
      return true;
    }
    if (s == 0) {
      const std::int64_t per_rank = static_cast<std::int64_t>(p_) * (g_ - 1);
      if (idx >= per_rank) return false;
      const std::int32_t jk = b0_order_[static_cast<std::size_t>(r * per_rank + idx)];
      c = make(jk / (g_ - 1), 0, jk % (g_ - 1), r, 2);
      return true;
    }
    if (idx >= steps) return false;
    c = make(s - 1, 1, b1_order_[b1_index(r, s - 1) + static_cast<std::size_t>(idx)], r, 2);
    return true;
  }
  bool stream_dep(Code code, int& r, int& st, std::int64_t& pos) const override {
    if (g_ == 1) {
      const At a = at(code);
      if (a.ph != 1 || a.sub != 0 || a.k == 0) return false;
      r = a.r;  // B(j, k − 1, r)
      st = 0;
      pos = stream_pos_[static_cast<std::size_t>(a.j * (nodes_ - 1) + a.k - 1)];
      return true;
    }
    int j = 0, k = -1;  // waits for phase 0's B touch (j, k) on r
    if (code >= opener0_) {
      const Code x = code - opener0_;
      r = static_cast<int>(x % static_cast<Code>(n_));
      j = static_cast<int>(x / static_cast<Code>(n_));
      k = g_ - 2;
    } else {
      const At a = at(code);
      r = a.r;
      j = a.j;
      if (a.ph == 0 && a.sub == 0 && a.k > 0) k = a.k - 1;  // the next send
      if (a.ph == 1 && a.sub == 0 && a.k == 0) k = g_ - 2;  // the rail's first send reads phase 0's result
      if (a.ph == 1 && a.sub == 0 && a.k > 0) {  // the rail's next send: piece j's phase-1 B touch k − 1
        st = 1 + j;
        const std::size_t at0 = b1_index(r, j);
        pos = 0;
        while (b1_order_[at0 + static_cast<std::size_t>(pos)] != a.k - 1) ++pos;
        return true;
      }
    }
    if (k < 0) return false;
    st = 0;
    const std::int64_t per_rank = static_cast<std::int64_t>(p_) * (g_ - 1);
    pos = b0_pos_[static_cast<std::size_t>(r * per_rank + j * (g_ - 1) + k)];
    return true;
  }

 private:
  struct At {
    int j = 0, ph = 0, k = 0, r = 0, sub = 0;
  };
  [[nodiscard]] At at(Code code) const {
    At a;
    a.j = static_cast<int>(code / per_piece_);
    Code x = code % per_piece_;
    a.ph = x < off_[1] ? 0 : x < off_[2] ? 1 : x < off_[3] ? 2 : 3;
    x -= off_[a.ph];
    if (a.ph <= 1) {
      a.sub = static_cast<int>(x % 3);
      x /= 3;
    } else if (a.ph == 3) {
      a.sub = static_cast<int>(x % static_cast<Code>(nodes_));
      x /= static_cast<Code>(nodes_);
    }
    a.r = static_cast<int>(x % static_cast<Code>(n_));
    a.k = static_cast<int>(x / static_cast<Code>(n_));
    return a;
  }
  [[nodiscard]] Code make(int j, int ph, int k, int r, int sub) const {
    Code x = static_cast<Code>(k) * static_cast<Code>(n_) + static_cast<Code>(r);
    if (ph <= 1) x = x * 3 + static_cast<Code>(sub);
    if (ph == 3) x = x * static_cast<Code>(nodes_) + static_cast<Code>(sub);
    return static_cast<Code>(j) * per_piece_ + off_[ph] + x;
  }
  [[nodiscard]] static int mod(int v, int m) { return ((v % m) + m) % m; }
  [[nodiscard]] static std::int64_t part(int c, std::int64_t length, int m) {
    return split_point(c + 1, length, m) - split_point(c, length, m);
  }
  [[nodiscard]] std::size_t index(int j, int x) const {
    return static_cast<std::size_t>(j) * static_cast<std::size_t>(g_) + static_cast<std::size_t>(x);
  }
  [[nodiscard]] std::size_t at_rank(int j, int r) const {
    return static_cast<std::size_t>(j) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(r);
  }
  [[nodiscard]] int intra_next(int r) const { return r - r % g_ + (r % g_ + 1) % g_; }
  [[nodiscard]] int rail_next(int r) const { return (r + g_) % n_; }
  // What rail l reduces: the intra chunk its rank holds after phase 0.
  [[nodiscard]] std::int64_t rail_length(int j, int l) const { return intra_[index(j, (l + 1) % g_)]; }

  // --- Longest paths (the header comment). Sizes: rail chunk c of rail l, s1 = part(c,
  // rail_length(j, l), N); a phase-3 move of intra chunk x's rail chunk c, part(c,
  // intra(j, x), N).
  [[nodiscard]] SimTime intra_ps(std::int64_t elements) const { return cost(intra_cost_, intra_hop_, elements, false); }
  [[nodiscard]] SimTime rail_ps(std::int64_t elements) const { return cost(rail_cost_, rail_hop_, elements, false); }
  [[nodiscard]] SimTime touch_ps(std::int64_t elements) const { return cost(touch_cost_, {}, elements, true); }
  struct Hop {
    int a = 0, b = 0;
  };
  struct Cost {
    std::int64_t elements;
    SimTime ps;
  };
  SimTime cost(std::vector<Cost>& cache, Hop hop, std::int64_t elements, bool touch) const {
    for (const Cost& c : cache)
      if (c.elements == elements) return c.ps;
    const SimTime ps = touch ? accumulate_ps(*type_, elements, dtype_) : move_ps(*m_, hop.a, hop.b, elements * eb_);
    cache.push_back(Cost{elements, ps});
    return ps;
  }
  // k steps of d each, saturating at the clock's limit as add_sim_time does.
  static SimTime times(int k, SimTime d) {
    if (k <= 0) return 0;
    return d > kMaxSimTime / k ? kMaxSimTime : std::min(d * k, kMaxSimTime);
  }

  // Phase 3: the move of rail chunk c of intra chunk x at step k.
  [[nodiscard]] SimTime rank3(int j, int k, int x, int c) const {
    SimTime r = times(g_ - 1 - k, intra_ps(part(c, intra_[index(j, x)], nodes_)));
    if (c == nodes_ - 1 && j + kPiecesInFlight < p_)  // releases the next piece's send of chunk 0 of intra chunk x − 1
      r = add_sim_time(r, times(g_ - 1, intra_ps(part(0, intra_[index(j + kPiecesInFlight, mod(x - 1, g_))], nodes_))));
    return r;
  }
  // Phase 1: rail l's reduce-scatter move of rail chunk c at step k (its touches: less the move).
  [[nodiscard]] SimTime rank1(int j, int k, int l, int c) const {
    const std::int64_t e = part(c, rail_length(j, l), nodes_);
    return add_sim_time(times(nodes_ - 1 - k, add_sim_time(rail_ps(e), touch_ps(e))), h_[at_rank(j, l * nodes_ + c)]);
  }
  // Phase 2: rail l's all-gather move of rail chunk c at step k.
  [[nodiscard]] SimTime rank2(int j, int k, int l, int c) const {
    SimTime after = g_ > 1 ? rank3(j, 0, (l + 1) % g_, c) : 0;
    if (j + w1_ < p_) after = std::max(after, rank1(j + w1_, 0, l, mod(c - 2, nodes_)));
    return add_sim_time(times(nodes_ - 1 - k, rail_ps(part(c, rail_length(j, l), nodes_))), after);
  }
  // Phase 0: the move rank s sends at step k (touch false), or the touches on receiver s
  // at step k: walked from the phase's end (at most g − 1 steps).
  [[nodiscard]] SimTime rank0(int j, int k, int s, bool touch) const {
    const int node = s - s % g_, l0 = s % g_;
    const int sender0 = touch ? mod(l0 - 1, g_) : l0;  // the sender at step k
    // Step t's sender is sender0 + (t − k), its receiver the one after.
    const int last_receiver = node + mod(sender0 + (g_ - 2 - k) + 1, g_);
    SimTime v = f0_[at_rank(j, last_receiver)];
    for (int t = g_ - 2; t >= k; --t) {
      const int sl = mod(sender0 + (t - k), g_), receiver = node + mod(sl + 1, g_);
      const std::int64_t e = intra_[index(j, mod(sl - t, g_))];
      const SimTime a = add_sim_time(touch_ps(e), v);
      if (touch && t == k) return a;
      SimTime after = a;
      if (t == g_ - 2 && j + kPiecesInFlight < p_) after = std::max(after, r0_[at_rank(j + kPiecesInFlight, receiver)]);
      v = add_sim_time(intra_ps(e), after);
    }
    return v;
  }
  [[nodiscard]] SimTime rank(const At& a) const {
    const int l = a.r % g_, q = a.r / g_;
    switch (a.ph) {
      case 0: return rank0(a.j, a.k, a.r, a.sub != 0);
      case 1: {
        const int c = mod((a.sub == 0 ? q : q - 1) - a.k, nodes_);
        const SimTime m = rank1(a.j, a.k, l, c);
        return a.sub == 0 ? m : m - rail_ps(part(c, rail_length(a.j, l), nodes_));
      }
      case 2: return rank2(a.j, a.k, l, mod(q + 1 - a.k, nodes_));
      default: return rank3(a.j, a.k, mod(l + 1 - a.k, g_), a.sub);
    }
  }

  // Tables, piece by piece from the last (a window reaches forward to piece j + 8, along
  // the rails to j + rail_window):
  // h_[j][l·N + c] the path from the end of rail chunk c's reduce-scatter on rail l;
  // f0_[j][r] from the end of rank r's phase 0; r0_[j][r] from r's first phase-0 send.
  void ranks(const CollectiveSpec& s, const Machine& m) {
    m_ = &m;
    type_ = &m.type_of(DeviceId(0));
    dtype_ = s.dtype;
    eb_ = dtype_bytes(s.dtype);
    intra_hop_ = Hop{0, 1 % n_};
    rail_hop_ = Hop{0, g_ % n_};
    const std::size_t cells = static_cast<std::size_t>(p_) * static_cast<std::size_t>(n_);
    h_.assign(cells, 0);
    f0_.assign(g_ > 1 ? cells : 0, 0);
    r0_.assign(g_ > 1 ? cells : 0, 0);
    for (int j = p_ - 1; j >= 0; --j) {
      for (int l = 0; l < g_; ++l)
        for (int c = 0; c < nodes_; ++c)
          h_[at_rank(j, l * nodes_ + c)] = std::max(rank2(j, 0, l, c), g_ > 1 ? rank3(j, 0, (l + 1) % g_, c) : 0);
      if (g_ == 1) continue;
      for (int r = 0; r < n_; ++r) {
        const int l = r % g_, q = r / g_;
        SimTime best = rank1(j, 0, l, q);  // its rail reduce-scatter's first send, then its B touches
        for (int k = 0; k + 1 < nodes_; ++k) {
          const int c = mod(q - 1 - k, nodes_);
          best = std::max(best, rank1(j, k, l, c) - rail_ps(part(c, rail_length(j, l), nodes_)));
        }
        f0_[at_rank(j, r)] = best;
      }
      for (int r = 0; r < n_; ++r) r0_[at_rank(j, r)] = rank0(j, 0, r, false);
    }
    if (g_ > 1) {
      stream_orders();
      return;
    }
    // One rank per node: rank 0's B touches in priority order, then code order (j, k).
    const int steps = nodes_ - 1;
    std::vector<std::pair<SimTime, std::int32_t>> order;
    for (int j = 0; j < p_; ++j)
      for (int k = 0; k < steps; ++k) order.emplace_back(rank(at(make(j, 1, k, 0, 2))), j * steps + k);
    std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    stream_order_.resize(order.size());
    stream_pos_.resize(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      stream_order_[i] = order[i].second;
      stream_pos_[static_cast<std::size_t>(order[i].second)] = static_cast<std::int64_t>(i);
    }
  }

  // The B touches' streams with g > 1 (streams()): per rank its phase-0 B touches j·(g−1) + k
  // in stream order and each one's position; per rank and piece its phase-1 B touches' steps.
  void stream_orders() {
    const int per_rank = p_ * (g_ - 1), steps = nodes_ - 1;
    if (steps > std::numeric_limits<std::uint16_t>::max()) fail("collective: ", nodes_, " nodes are more than the generated hierarchical all-reduce supports");
    b0_order_.resize(static_cast<std::size_t>(n_) * static_cast<std::size_t>(per_rank));
    b0_pos_.resize(b0_order_.size());
    b1_order_.resize(static_cast<std::size_t>(n_) * static_cast<std::size_t>(p_) * static_cast<std::size_t>(steps));
    std::vector<std::pair<SimTime, std::int32_t>> order;
    for (int r = 0; r < n_; ++r) {
      order.clear();
      for (int j = 0; j < p_; ++j)
        for (int k = 0; k < g_ - 1; ++k) order.emplace_back(rank0(j, k, r, true), j * (g_ - 1) + k);
      std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
      const std::size_t base = static_cast<std::size_t>(r) * static_cast<std::size_t>(per_rank);
      for (std::size_t i = 0; i < order.size(); ++i) {
        b0_order_[base + i] = order[i].second;
        b0_pos_[base + static_cast<std::size_t>(order[i].second)] = static_cast<std::int32_t>(i);
      }
      const int l = r % g_, q = r / g_;
      for (int j = 0; j < p_; ++j) {
        order.clear();
        for (int k = 0; k < steps; ++k) {
          const int c = mod(q - 1 - k, nodes_);
          order.emplace_back(rank1(j, k, l, c) - rail_ps(part(c, rail_length(j, l), nodes_)), k);
        }
        std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
        for (int i = 0; i < steps; ++i) b1_order_[b1_index(r, j) + static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(order[static_cast<std::size_t>(i)].second);
      }
    }
  }
  [[nodiscard]] std::size_t b1_index(int r, int j) const {
    return (static_cast<std::size_t>(r) * static_cast<std::size_t>(p_) + static_cast<std::size_t>(j)) *
           static_cast<std::size_t>(nodes_ - 1);
  }

  int n_, g_, p_, w1_, nodes_ = 1;  // w1_: the rail phases' window (CollectiveSpec::rail_window)
  Code size_[4] = {}, off_[4] = {}, per_piece_ = 0;
  Code opener0_ = 0;  // codes from here open a rank's phase-1 B touches of a piece (opens())
  std::vector<std::int64_t> intra_;
  std::vector<std::int32_t> b0_order_, b0_pos_;
  std::vector<std::uint16_t> b1_order_;
  const Machine* m_ = nullptr;
  const DeviceType* type_ = nullptr;
  DType dtype_ = DType::f32;
  std::int64_t eb_ = 4;
  Hop intra_hop_, rail_hop_;
  mutable std::vector<Cost> intra_cost_, rail_cost_, touch_cost_;  // durations by size (a few sizes)
  std::vector<SimTime> h_, f0_, r0_;
  std::vector<std::int32_t> stream_order_;
  std::vector<std::int64_t> stream_pos_;
};

class Engine {
 public:
  Engine(const CollectiveSpec& spec, const Machine& m, const SimOptions& o, const Program& p)
      : spec_(spec), m_(m), o_(o), p_(p), n_(spec.ranks), nd_(spec.ranks) {}

  SimResult run() {
    const auto wall0 = std::chrono::steady_clock::now();
    setup();
    loop();
    SimResult r = finish();
    r.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return r;
  }

 private:
  struct Ready {
    std::uint64_t key;
    Code code;
    std::int64_t elements;  // the task's, so that starting it needs no second look at the program
    std::int32_t dst;       // a move's receiver
    std::int32_t stream;    // the stream that fed it (its successor is fed when it starts), -1 none
    friend bool operator>(const Ready& a, const Ready& b) { return a.key > b.key || (a.key == b.key && a.code > b.code); }
  };
  using Heap = std::vector<Ready>;
  struct Pool {
    std::int32_t link = -1;  // first link of its moves' routes (-1: every route, channels per device)
    int in_flight = 0;
    Heap heap;
  };
  struct Device {
    std::vector<Pool> pools;
    Heap copy;  // ready touches
    bool copy_busy = false;
    bool any_on = false;
    int moving = 0;  // moves holding a channel
    SimTime comm_since = 0, copy_since = 0, any_since = 0;
    SimTime comm_total = 0, copy_total = 0, any_total = 0;
    std::int64_t tasks = 0;
    std::vector<std::int64_t> stream_next;  // per stream: the index of its next task
    std::vector<std::int64_t> stream_done;  // per stream: its tasks finished (in order)
  };
  struct Event {
    Code code;
    std::int32_t touch_dev;  // a touch's device, -1 for a move's arrival
    std::int32_t stream;     // a touch fed by a stream: which, -1 none
  };
  // Per device, the route of its last transfer (a ring rank always sends to one peer).
  struct LastRoute {
    std::int32_t dst = -1;
    std::uint32_t channel = 0;
    std::int32_t first = -1;  // first link, -1 for an empty route
    SimTime latency = 0;
    double bytes_per_s = 0;
    std::vector<LinkId> links;
  };

  void setup() {
    m_.validate(m_.name.empty() ? "machine" : m_.name);
    if (o_.comm_channels < 1) fail("simulate: comm_channels must be >= 1, got ", o_.comm_channels);
    if (n_ > m_.num_devices())
      fail("the collective spans ", n_, " ranks but machine '", m_.name, "' has ", m_.num_devices(), " devices");
    link_bytes_.assign(m_.links.size(), 0);
    // The longest route any transfer takes bounds the per-slot route entries. Routes of
    // the machine's presets are symmetric in their levels: from rank 0 to every rank and
    // back covers every length; a longer one is caught when it is filled.
    std::vector<LinkId> scratch;
    std::int32_t longest = 0;
    for (int d = 1; d < n_; ++d)
      for (auto [a, b] : {std::pair{0, d}, std::pair{d, 0}, std::pair{d - 1, d}}) {
        m_.route(DeviceId(a), DeviceId(b), scratch);
        longest = std::max(longest, static_cast<std::int32_t>(scratch.size()));
      }
    stride_links_ = std::max(longest, 1);
    topology_ = m_.has_topology();
    // Channel pools: with channels_per_link one per distinct first link of a rank's routes
    // (found as its transfers start), comm_channels each; else one per device.
    pools_max_ = 1;
    if (o_.channels_per_link) {
      std::vector<std::int32_t> firsts;
      for (int d = 0; d < std::min(n_, 2); ++d) {
        firsts.clear();
        for (int e = 0; e < n_; ++e) {
          if (e == d) continue;
          m_.route(DeviceId(d), DeviceId(e), scratch);
          const std::int32_t f = scratch.empty() ? -1 : scratch[0].value;
          if (std::find(firsts.begin(), firsts.end(), f) == firsts.end()) firsts.push_back(f);
        }
        pools_max_ = std::max(pools_max_, static_cast<int>(firsts.size()));
      }
    }
    chan_stride_ = static_cast<std::size_t>(o_.comm_channels) * static_cast<std::size_t>(pools_max_);
    choose_period();
    devs_.resize(static_cast<std::size_t>(nd_));
    const std::size_t slots = static_cast<std::size_t>(nd_) * chan_stride_;
    routes_.links.assign(slots * static_cast<std::size_t>(stride_links_), LinkId());
    routes_.entries.assign(slots, RouteTable::Entry{});
    for (std::size_t s = 0; s < slots; ++s) routes_.entries[s].offset = static_cast<std::int32_t>(s) * stride_links_;
    routes_.max_length = stride_links_;
    slot_code_.assign(slots, 0);
    slot_busy_.assign(slots, 0);
    slot_pool_.assign(slots, 0);
    network_ = make_network_model(o_.network, NetworkContext{m_, routes_, static_cast<std::int32_t>(slots), true});
    for (auto& d : devs_) {
      d.stream_next.assign(static_cast<std::size_t>(p_.streams()), 0);
      d.stream_done.assign(static_cast<std::size_t>(p_.streams()), 0);
    }
    last_route_.resize(static_cast<std::size_t>(nd_));
    waiting_.reserve(static_cast<std::size_t>(nd_) * 4);
    eb_ = dtype_bytes(spec_.dtype);
  }

  // The smallest period of ranks the program and the machine are invariant under
  // (collective_symmetry.h); the engine then simulates ranks 0..period−1 only.
  void choose_period() {
    if (!o_.symmetry) {
      note_ = "turned off (--no-symmetry)";
      return;
    }
    std::vector<int> to;
    p_.peers(0, to);
    if (to.empty()) {
      note_ = "the reduction covers ring reduce-scatter, all-gather and all-reduce only";
      return;
    }
    note_ = "no period of the ranks";
    const int channels = topology_ ? static_cast<int>(chan_stride_) : 1;  // elsewhere routes ignore the channel
    LastRoute lr;
    const SymmetryRouteFn route = [&](std::int32_t src, std::int32_t dst, std::uint32_t channel,
                                      std::vector<LinkId>& out) {
      fill_route(lr, src, dst, channel);
      out = lr.links;
    };
    for (int period = 1; period <= n_ / 2; ++period) {
      if (n_ % period != 0) continue;
      if (!p_.periodic(period)) {
        note_ = "chunks of unequal sizes or a program without a period (" + std::to_string(period) + " ranks)";
        continue;
      }
      const std::string why = check_shift_symmetry(m_, n_, period, channels, std::bind_front(&Program::peers, &p_), route,
                                                     link_canon_);
      if (!why.empty()) {
        note_ = "period " + std::to_string(period) + ": " + why;
        continue;
      }
      period_ = nd_ = period;
      note_.clear();
      return;
    }
  }

  // Undisturbed duration of an accumulating touch of `elements` on device `dev`, as the
  // compute model times the expanded form's touches.
  SimTime touch_ps(std::int32_t dev, std::int64_t elements) {
    const DeviceType* dt = &m_.type_of(DeviceId(dev));
    for (const auto& c : touch_cache_)
      if (c.type == dt && c.elements == elements) return c.ps;
    const SimTime ps = accumulate_ps(*dt, elements, spec_.dtype);
    touch_cache_.push_back(TouchTime{dt, elements, ps});
    return ps;
  }

  void loop() {
    events_ = nd_;  // the expanded form's input tasks, which complete at once
    std::vector<Code> init;
    p_.initial(init);
    for (Code c : init)
      if (p_.task(c).dev < nd_) make_ready(c, -1);  // reduced: the simulated ranks' only
    for (int r = 0; r < nd_; ++r)
      for (int s = 0; s < p_.streams(); ++s)
        if (p_.stream_open_at_start(s)) feed(r, s);
    for (int r = 0; r < nd_; ++r) dispatch(r, 0);
    for (;;) {
      const SimTime t = std::min(queue_.next_time(), network_->next_time());
      if (t == kNever) break;
      if (t >= kMaxSimTime)
        fail("simulate: the simulated collective passes ", kMaxSimSeconds, " s, the simulator's clock limit");
      while (queue_.next_time() == t) {
        const Event e = queue_.pop();
        if (e.touch_dev >= 0) {
          Device& d = devs_[static_cast<std::size_t>(e.touch_dev)];
          d.copy_busy = false;
          d.copy_total += t - d.copy_since;
          any_update(e.touch_dev, t);
          mark(e.touch_dev);  // its copy lane is free for the next touch
        }
        if (e.stream >= 0)
          ++devs_[static_cast<std::size_t>(e.touch_dev)].stream_done[static_cast<std::size_t>(e.stream)];
        complete(e.code, t, e.stream >= 0);
      }
      if (network_->due(t)) {
        finished_.clear();
        events_ += network_->advance(t, finished_) - static_cast<std::int64_t>(finished_.size());
        for (std::int32_t slot : finished_) finish_transfer(slot, t);
      }
      flush(t);
    }
    if (completed_ != expected_) {
      throw std::logic_error("simulator: the generated collective finished " + std::to_string(completed_) + " of " +
                             std::to_string(expected_) + " tasks (internal error)");
    }
  }

  // Feeds stream s of rank r's next task to its lane.
  void feed(int r, int s) {
    auto& next = devs_[static_cast<std::size_t>(r)].stream_next[static_cast<std::size_t>(s)];
    Code c = 0;
    if (!p_.stream_task(r, s, next, c)) return;
    ++next;
    push(c, s);
  }

  void make_ready(Code c, std::int32_t stream) {
    int r = 0, s = 0;
    if (p_.opens(c, r, s)) {
      feed(r, s);
      return;
    }
    push(c, stream);
  }

  void push(Code c, std::int32_t stream) {
    const Gen g = p_.task(c);
    ++expected_;
    Device& d = devs_[static_cast<std::size_t>(g.dev)];
    Heap* h = nullptr;
    if (g.kind == Kind::touch) {
      h = &d.copy;
    } else {
      h = &pool_of(g.dev, g.dst).heap;
    }
    h->push_back(Ready{g.key, c, g.elements, g.dst, stream});
    std::push_heap(h->begin(), h->end(), std::greater<>());
    mark(g.dev);
  }

  // Channel c takes the ECMP route of (dev, dst, c) on a topology graph (ChannelRoutes in
  // network.h; elsewhere the channel changes nothing).
  const LastRoute& route_of(std::int32_t dev, std::int32_t dst, std::uint32_t channel = 0) {
    if (!topology_) channel = 0;
    LastRoute& lr = last_route_[static_cast<std::size_t>(dev)];
    if (lr.dst == dst && lr.channel == channel) return lr;
    fill_route(lr, dev, dst, channel);
    return lr;
  }
  void fill_route(LastRoute& lr, std::int32_t dev, std::int32_t dst, std::uint32_t channel) {
    if (!topology_) channel = 0;
    m_.route(DeviceId(dev), DeviceId(dst), scratch_, channel);
    if (channel != 0 && static_cast<std::int32_t>(scratch_.size()) > stride_links_)
      m_.route(DeviceId(dev), DeviceId(dst), scratch_, 0);  // as ChannelRoutes: never longer than counted
    // As RouteTable::add builds an entry: duplicate links dropped.
    lr.dst = dst;
    lr.channel = channel;
    lr.links.clear();
    lr.latency = 0;
    lr.bytes_per_s = std::numeric_limits<double>::infinity();
    for (LinkId l : scratch_) {
      if (std::find(lr.links.begin(), lr.links.end(), l) != lr.links.end()) continue;
      lr.links.push_back(l);
      const Link& link = m_.link(l);
      lr.latency = add_sim_time(lr.latency, to_sim_time(link.latency_s));
      lr.bytes_per_s = std::min(lr.bytes_per_s, link.bytes_per_s);
    }
    lr.first = lr.links.empty() ? -1 : lr.links[0].value;
  }

  Pool& pool_of(std::int32_t dev, std::int32_t dst) {
    Device& d = devs_[static_cast<std::size_t>(dev)];
    const std::int32_t first = o_.channels_per_link ? route_of(dev, dst).first : -1;
    for (Pool& p : d.pools)
      if (p.link == first) return p;
    if (static_cast<int>(d.pools.size()) >= pools_max_)
      throw std::logic_error("simulator: a rank of the generated collective sends over more first links than counted");
    d.pools.push_back(Pool{first, 0, {}});
    return d.pools.back();
  }

  void mark(std::int32_t dev) {
    if (dirty_flag_.empty()) dirty_flag_.assign(static_cast<std::size_t>(nd_), 0);
    if (!dirty_flag_[static_cast<std::size_t>(dev)]) {
      dirty_flag_[static_cast<std::size_t>(dev)] = 1;
      dirty_.push_back(dev);
    }
  }

  void flush(SimTime t) {
    while (!dirty_.empty()) {
      scratch_dirty_.swap(dirty_);
      for (std::int32_t dev : scratch_dirty_) {
        dirty_flag_[static_cast<std::size_t>(dev)] = 0;
        dispatch(dev, t);
      }
      scratch_dirty_.clear();
    }
  }

  void dispatch(std::int32_t dev, SimTime t) {
    Device& d = devs_[static_cast<std::size_t>(dev)];
    if (!d.copy_busy && !d.copy.empty()) {
      std::pop_heap(d.copy.begin(), d.copy.end(), std::greater<>());
      const Ready r = d.copy.back();
      d.copy.pop_back();
      if (r.stream >= 0) feed(dev, r.stream);
      d.copy_busy = true;
      d.copy_since = t;
      any_update(dev, t);
      ++d.tasks;
      queue_.push(t + touch_ps(dev, r.elements), Event{r.code, dev, r.stream});
    }
    // Moves start best first across the pools, as the expanded form takes the best bucket
    // top: two moves starting at one instant get the channels (and so ECMP routes) in that order.
    for (;;) {
      std::size_t best = d.pools.size();
      for (std::size_t pi = 0; pi < d.pools.size(); ++pi) {
        const Pool& p = d.pools[pi];
        if (p.in_flight >= o_.comm_channels || p.heap.empty()) continue;
        if (best == d.pools.size() || d.pools[best].heap.front() > p.heap.front()) best = pi;
      }
      if (best == d.pools.size()) break;
      Pool& p = d.pools[best];
      std::pop_heap(p.heap.begin(), p.heap.end(), std::greater<>());
      const Ready r = p.heap.back();
      p.heap.pop_back();
      ++p.in_flight;
      start_move(dev, static_cast<std::int32_t>(best), r, t);
      if (r.stream >= 0) feed(dev, r.stream);  // may add a pool: d.pools may reallocate
    }
  }

  void start_move(std::int32_t dev, std::int32_t pool, const Ready& r, SimTime t) {
    const Code c = r.code;
    Device& d = devs_[static_cast<std::size_t>(dev)];
    std::size_t slot = static_cast<std::size_t>(dev) * chan_stride_;
    while (slot_busy_[slot]) ++slot;
    slot_busy_[slot] = 1;
    slot_code_[slot] = c;
    slot_pool_[slot] = pool;
    // The slot's route entry: the ECMP route of its channel (its slot on the device).
    const LastRoute& lr = route_of(dev, r.dst, static_cast<std::uint32_t>(slot - static_cast<std::size_t>(dev) * chan_stride_));
    RouteTable::Entry& e = routes_.entries[slot];
    if (static_cast<std::int32_t>(lr.links.size()) > stride_links_)
      throw std::logic_error("simulator: a route of the generated collective is longer than the longest counted");
    e.latency = lr.latency;
    e.bytes_per_s = lr.bytes_per_s;
    e.length = static_cast<std::int32_t>(lr.links.size());
    std::copy(lr.links.begin(), lr.links.end(), routes_.links.begin() + e.offset);
    const std::int64_t bytes = r.elements * eb_;
    for (LinkId l : routes_.route(static_cast<std::int32_t>(slot)))
      link_bytes_[l.index()] = checked_add(link_bytes_[l.index()], bytes, "simulate: bytes over one link");
    bytes_moved_ = checked_add(bytes_moved_, bytes, "simulate: bytes moved");
    if (d.moving++ == 0) {
      d.comm_since = t;
      any_update(dev, t);
    }
    ++d.tasks;
    network_->start(static_cast<std::int32_t>(slot), static_cast<std::int32_t>(slot), bytes, 1.0, t);
  }

  void finish_transfer(std::int32_t s, SimTime t) {
    const auto slot = static_cast<std::size_t>(s);
    const Code c = slot_code_[slot];
    const SimTime latency = routes_.latency(s);
    const std::int32_t dev = static_cast<std::int32_t>(slot / chan_stride_);
    Device& d = devs_[static_cast<std::size_t>(dev)];
    --d.pools[static_cast<std::size_t>(slot_pool_[slot])].in_flight;
    slot_busy_[slot] = 0;
    if (--d.moving == 0) {
      d.comm_total += t - d.comm_since;
      any_update(dev, t);
    }
    mark(dev);
    if (latency > 0) {
      ++events_;
      queue_.push(t + latency, Event{c, -1, -1});
    } else {
      complete(c, t);
    }
  }

  // Any lane of `dev` busy: the union of its lanes' busy time.
  void any_update(std::int32_t dev, SimTime t) {
    Device& d = devs_[static_cast<std::size_t>(dev)];
    const bool busy = d.copy_busy || d.moving > 0;
    if (busy && !d.any_on) {
      d.any_on = true;
      d.any_since = t;
    } else if (!busy && d.any_on) {
      d.any_on = false;
      d.any_total += t - d.any_since;
    }
  }

  // `from_stream`: c is a stream's task (the stream dependency of its successors).
  void complete(Code c, SimTime t, bool from_stream = false) {
    ++completed_;
    ++events_;
    makespan_ = std::max(makespan_, t);
    succ_.clear();
    p_.successors(c, succ_);
    for (Code s : succ_) {
      if (period_ > 0) s = p_.canonical(s, period_);  // rank P's task is rank 0's
      const int deps = p_.deps(s);
      int sr = 0, ss = 0;
      std::int64_t pos = 0;
      if (deps == 2 && p_.stream_dep(s, sr, ss, pos)) {
        if (from_stream) {  // the other dependency recorded itself if it finished first
          auto it = waiting_.find(s);
          if (it == waiting_.end()) continue;
          waiting_.erase(it);
        } else if (pos >= devs_[static_cast<std::size_t>(sr)].stream_done[static_cast<std::size_t>(ss)]) {
          waiting_.emplace(s, 1);
          continue;
        }
      } else if (deps > 1) {
        auto it = waiting_.try_emplace(s, deps).first;
        if (--it->second > 0) continue;
        waiting_.erase(it);
      }
      make_ready(s, -1);
    }
  }

  SimResult finish() {
    SimResult r;
    r.network = std::string(network_->name());
    r.policy = o_.policy;
    r.makespan_s = to_seconds(makespan_);
    r.events = events_;
    r.events_unreduced = events_;
    r.bytes_moved = bytes_moved_;
    r.link_bytes = std::move(link_bytes_);
    r.devices.resize(static_cast<std::size_t>(nd_));
    for (std::size_t dev = 0; dev < r.devices.size(); ++dev) {
      const Device& d = devs_[dev];
      DeviceStats& s = r.devices[dev];
      s.comm_busy_s = to_seconds(d.comm_total);
      s.copy_busy_s = to_seconds(d.copy_total);
      s.busy_s = to_seconds(d.any_total);
      s.idle_s = to_seconds(makespan_ - d.any_total);
      s.tasks = d.tasks;
    }
    r.timeline.source = "sim";
    if (period_ > 0) expand_symmetric_result(r, n_, period_, link_canon_);
    r.symmetry_note = note_;
    return r;
  }

  struct TouchTime {
    const DeviceType* type;
    std::int64_t elements;
    SimTime ps;
  };

  const CollectiveSpec& spec_;
  const Machine& m_;
  const SimOptions& o_;
  const Program& p_;
  int n_;
  int nd_;          // ranks simulated: n_, or the symmetry period
  int period_ = 0;  // > 0: ranks 0..period_−1 stand for all (collective_symmetry.h)
  std::vector<std::int32_t> link_canon_;
  std::string note_;
  std::int64_t eb_ = 4;
  std::vector<Device> devs_;
  int pools_max_ = 1;
  std::size_t chan_stride_ = 1;
  std::int32_t stride_links_ = 1;
  bool topology_ = false;  // routes depend on the channel (ECMP per channel)
  RouteTable routes_;  // one entry per transfer slot, refilled when a transfer starts on it
  std::vector<Code> slot_code_;
  std::vector<char> slot_busy_;
  std::vector<std::int32_t> slot_pool_;
  std::unique_ptr<NetworkModel> network_;
  TimeBucketQueue<Event> queue_;
  std::vector<std::int32_t> finished_, dirty_, scratch_dirty_;
  std::vector<char> dirty_flag_;
  std::vector<Code> succ_;
  std::vector<LinkId> scratch_;
  std::vector<LastRoute> last_route_;
  // Tasks with several dependencies, some finished: how many are left (lookups only; no
  // order is taken from the map).
  std::unordered_map<Code, int> waiting_;
  std::vector<TouchTime> touch_cache_;
  std::vector<std::int64_t> link_bytes_;
  std::int64_t bytes_moved_ = 0;
  std::int64_t events_ = 0;
  std::int64_t completed_ = 0, expected_ = 0;
  SimTime makespan_ = 0;
};

}  // namespace

std::string generated_form_unsupported(const CollectiveSpec& spec, const Machine& m, const SimOptions& o) {
  if (spec.algorithm == Algorithm::tree) return "the tree algorithm is not generated yet";
  if (o.network != "flow") return "the generated form runs under the flow network model only";
  if (o.policy != Policy::async) return "the generated form runs under the async policy only";
  if (o.priority != Priority::longest_path) return "the generated form orders ready tasks as longest-path does";
  if (!o.task_seconds.empty() || !o.task_seconds_cold.empty()) return "measured task seconds need the expanded form";
  if (o.record_memory) return "buffer memory is tracked in the expanded form only";
  for (int d = 0; d < std::min(spec.ranks, m.num_devices()); ++d) {
    const DeviceType& dt = m.type_of(DeviceId(d));
    if (dt.single_lane || dt.copy_row_s > 0) return "device type '" + dt.name + "' needs the expanded form (single lane or per-row copy costs)";
  }
  return {};
}

SimResult simulate_collective_node(const TaskGraph& tg, const Machine& m, const SimOptions& o) {
  if (has_lowered_collectives(tg)) return simulate(expand_collectives(tg), m, o);  // collective nodes in a lowered graph
  if (tg.tasks.size() != 1 || tg.collectives.size() != 1 || tg.tasks[0].kind != TaskKind::collective ||
      tg.tasks[0].block != 0)
    fail("task graph: a collective node must be the graph's only task (collective nodes beside other tasks are not "
         "supported yet)");
  const CollectiveSpec& spec = tg.collectives[0];
  if (!generated_form_unsupported(spec, m, o).empty()) return simulate(expand_collectives(tg), m, o);
  (void)collective_node_graph(spec);  // the expanded form's checks of the spec
  std::unique_ptr<Program> p;
  if (spec.collective == Collective::alltoall) {
    p = std::make_unique<Pairwise>(spec);
  } else if (spec.algorithm == Algorithm::hierarchical) {
    p = std::make_unique<Hierarchical>(spec, m);
  } else {
    p = std::make_unique<Ring>(spec);
  }
  return Engine(spec, m, o, *p).run();
}

}  // namespace tessel::sim

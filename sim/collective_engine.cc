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
  // Shifting ranks by `period` (collective_symmetry.h): whether it maps every task onto a
  // task of the same size and order (false: never reduced), the ranks r sends to, and a
  // code's image on ranks 0..period−1.
  [[nodiscard]] virtual bool periodic(int /*period*/) const { return false; }
  virtual void peers(int /*r*/, std::vector<int>& /*out*/) const {}
  [[nodiscard]] virtual Code canonical(Code c, int /*period*/) const { return c; }
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
  explicit Ring(const CollectiveSpec& s) : c_(s.collective), m_(s.ranks), p_(s.slices) {
    elements_ = s.bytes / dtype_bytes(s.dtype);
    steps_ = c_ == Collective::allreduce ? 2 * (m_ - 1) : m_ - 1;
    touch_steps_ = c_ == Collective::allgather ? 0 : m_ - 1;
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
    // Longest path first: a piece whose end releases later pieces (the window) before
    // one that releases fewer, then the earlier step, then the earlier piece.
    const auto chained = static_cast<std::uint64_t>(windowed() ? (p_ - 1 - j) / kPiecesInFlight : 0);
    const auto most = static_cast<std::uint64_t>(windowed() ? (p_ - 1) / kPiecesInFlight : 0);
    g.key = ((((most - chained) * static_cast<std::uint64_t>(steps_) + static_cast<std::uint64_t>(s)) *
                  static_cast<std::uint64_t>(p_) +
              static_cast<std::uint64_t>(j))
             << 2) |
            static_cast<std::uint64_t>(sub);
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
    if (s == 0) return windowed() && j >= kPiecesInFlight ? 1 : 0;
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
    // The last move into `to` of piece j releases `to`'s first send of piece j + kPiecesInFlight.
    if (windowed() && s == steps_ - 1 && j + kPiecesInFlight < p_) out.push_back(make(j + kPiecesInFlight, 0, to, 0));
  }

  void initial(std::vector<Code>& out) const override {
    if (m_ < 2) return;
    const int first = windowed() ? std::min(p_, kPiecesInFlight) : p_;
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
    pos = 0;
    const int most = windowed() ? (p_ - 1) / kPiecesInFlight : 0;
    for (int chained = most; chained >= 0; --chained) {
      const int lo = windowed() ? std::max(0, p_ - kPiecesInFlight * (chained + 1)) : 0;
      const int hi = windowed() ? p_ - 1 - kPiecesInFlight * chained : p_ - 1;
      if (j > hi) {
        pos += static_cast<std::int64_t>(touch_steps_) * (hi - lo + 1);
        continue;
      }
      pos += static_cast<std::int64_t>(s - 1) * (hi - lo + 1) + (j - lo);
      return true;
    }
    return false;
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
    // In key order: pieces grouped by how many later pieces they release (most first),
    // then step, then piece.
    const int most = windowed() ? (p_ - 1) / kPiecesInFlight : 0;
    for (int chained = most; chained >= 0; --chained) {
      const int lo = windowed() ? std::max(0, p_ - kPiecesInFlight * (chained + 1)) : 0;
      const int hi = windowed() ? p_ - 1 - kPiecesInFlight * chained : p_ - 1;  // inclusive
      const std::int64_t group = static_cast<std::int64_t>(touch_steps_) * (hi - lo + 1);
      if (idx >= group) {
        idx -= group;
        continue;
      }
      c = make(lo + static_cast<int>(idx % (hi - lo + 1)), static_cast<int>(idx / (hi - lo + 1)), r, 2);
      return true;
    }
    return false;
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
  int m_, p_;
  std::int64_t elements_ = 0;
  int steps_ = 0, touch_steps_ = 0;
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
    if (touch_graph_.buffers.empty()) touch_graph_.buffers.push_back(Buffer{DeviceId(0), Shape{1}, spec_.dtype, Agg::sum, NodeId(0)});
    Task t;
    t.kind = TaskKind::touch;
    t.op = TouchOp::accumulate;
    t.agg = Agg::sum;
    t.writes = BufferId(0);
    t.src.rank = 1;
    t.src.size[0] = elements;
    t.dst = t.src;
    t.flops = static_cast<double>(elements);
    t.bytes = elements * eb_;
    const SimTime ps = to_sim_time(compute_seconds(t, touch_graph_, *dt));
    if (ps >= kMaxSimTime) fail("simulate: a touch of the collective alone would pass the simulator's clock limit");
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
      for (int s = 0; s < p_.streams(); ++s) feed(r, s);
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

  void make_ready(Code c, std::int32_t stream) { push(c, stream); }

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
    for (std::size_t pi = 0; pi < d.pools.size(); ++pi) {
      while (d.pools[pi].in_flight < o_.comm_channels && !d.pools[pi].heap.empty()) {
        Pool& p = d.pools[pi];
        std::pop_heap(p.heap.begin(), p.heap.end(), std::greater<>());
        const Ready r = p.heap.back();
        p.heap.pop_back();
        ++p.in_flight;
        start_move(dev, static_cast<std::int32_t>(pi), r, t);
        if (r.stream >= 0) feed(dev, r.stream);  // may add a pool: d.pools may reallocate
      }
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
  TaskGraph touch_graph_;  // one buffer, for the compute model's dtype lookup
  std::vector<std::int64_t> link_bytes_;
  std::int64_t bytes_moved_ = 0;
  std::int64_t events_ = 0;
  std::int64_t completed_ = 0, expected_ = 0;
  SimTime makespan_ = 0;
};

}  // namespace

std::string generated_form_unsupported(const CollectiveSpec& spec, const Machine& m, const SimOptions& o) {
  if (spec.algorithm == Algorithm::tree || spec.algorithm == Algorithm::hierarchical)
    return "the " + std::string(to_string(spec.algorithm)) + " algorithm is not generated yet";
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
  } else {
    p = std::make_unique<Ring>(spec);
  }
  return Engine(spec, m, o, *p).run();
}

}  // namespace tessel::sim

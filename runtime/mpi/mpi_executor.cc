#include "runtime/mpi/mpi_executor.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>

#include "core/collective_rewrite.h"
#include "core/error.h"
#include "runtime/mpi/doorbell.h"
#include "runtime/mpi/mpi_session.h"

namespace tessel::runtime {

namespace {

// TESSEL_MPI_TRACE=1: each rank prints its link's events to stderr at the end of every
// run, one line each — `TRACE rR <steady-clock us> <event> <task or -1> <value>` — so that
// where a move's time goes (packed and handed over, posted, completed, the thread's
// waits) can be read off both ranks on one clock (all ranks of one machine share it).
class LinkTrace {
 public:
  static bool on() {
    static const bool v = std::getenv("TESSEL_MPI_TRACE") != nullptr;
    return v;
  }
  static void event(const char* what, long id = -1, double value = 0) {
    if (!on()) return;
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
    char line[128];
    std::snprintf(line, sizeof line, "%.1f %s %ld %.1f", us, what, id, value);
    std::lock_guard<std::mutex> lock(mutex());
    lines().emplace_back(line);
  }
  static void flush(int rank) {
    if (!on()) return;
    std::lock_guard<std::mutex> lock(mutex());
    for (const std::string& l : lines()) std::fprintf(stderr, "TRACE r%d %s\n", rank, l.c_str());
    lines().clear();
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& lines() {
    static std::vector<std::string> l;
    return l;
  }
};

}  // namespace

// The RemoteLink of one rank: the communication thread and its MPI requests.
class MpiLink final : public RemoteLink {
 public:
  MpiLink(MPI_Comm comm, int rank, int ranks, Policy policy, bool pin_threads)
      : comm_(comm), rank_(rank), ranks_(ranks), policy_(policy), pin_threads_(pin_threads), bells_(comm) {
    if (const char* f = std::getenv("TESSEL_MPI_FAULT")) {  // tests: RANK:TASK, RANK:any, RANK:kill, 0:setup
      std::string s(f);
      auto colon = s.find(':');
      if (colon != std::string::npos && std::atoi(s.substr(0, colon).c_str()) == rank) {
        std::string what = s.substr(colon + 1);
        if (what == "setup")
          ;  // Doorbells: rank 0 dies while making its shared segment
        else if (what == "kill")
          fault_kill_ = true;
        else if (what == "any")
          fault_any_ = true;
        else
          fault_task_ = std::atoi(what.c_str());
      }
    }
  }
  ~MpiLink() override {
    stop_thread(true);
    if (!thread_.joinable()) return;
    quit_ = true;
    bells_.ring(rank_);
    thread_.join();
  }

  void configure(int first, int last, int devices) {
    first_ = first;
    last_ = last;
    devices_ = devices;
  }
  [[nodiscard]] int first_device() const override { return first_; }
  [[nodiscard]] int last_device() const override { return last_; }

  int rank_of(DeviceId d) const {
    // The inverse of MpiExecutor::devices_of: the largest r with r·N/R <= d.
    int r = static_cast<int>((static_cast<std::int64_t>(d.value) * ranks_ + ranks_ - 1) / devices_);
    while (r > 0 && MpiExecutor::devices_of(r, ranks_, devices_).first > d.value) --r;
    while (r + 1 < ranks_ && MpiExecutor::devices_of(r + 1, ranks_, devices_).first <= d.value) ++r;
    return r;
  }

  void begin(const TaskGraph& tg, RemoteRun run) override {
    tg_ = &tg;
    run_ = std::move(run);
    ending_ = false;
    abandon_ = false;
    phases_released_ = 0;
    num_phases_ = 0;
    sends_open_ = barriers_open_ = 0;
    if (policy_ == Policy::bsp)
      for (const Task& t : tg.tasks) num_phases_ = std::max(num_phases_, bsp_phase(t) + 1);
    // Every move into this rank is posted now, straight into its destination buffer.
    int tag_ub = 32767;
    {
      void* attr = nullptr;
      int flag = 0;
      MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag);
      if (flag && attr) tag_ub = *static_cast<int*>(attr);
    }
    if (static_cast<std::int64_t>(tg.tasks.size()) > tag_ub)
      fail("--backend mpi: the task graph has ", tg.tasks.size(), " tasks but this MPI's largest tag is ", tag_ub,
           " (moves are tagged by task id)");
    for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
      const Task& t = tg.tasks[i];
      if (t.kind != TaskKind::move || !mine(t.dst_device) || mine(t.device)) continue;
      const std::int64_t bytes = tg.buffer(t.writes).bytes() / dtype_bytes(tg.buffer(t.writes).dtype) * run_.element_bytes;
      if (bytes > std::numeric_limits<int>::max())
        fail("--backend mpi: move task ", i, " carries ", bytes, " bytes, more than one MPI message's int count");
      void* dst = run_.buffer(t.writes);
      MPI_Request req;
      MPI_Irecv(dst, static_cast<int>(bytes), MPI_BYTE, rank_of(t.device), static_cast<int>(i), comm_, &req);
      add(req, Pending{Pending::recv, static_cast<std::int32_t>(i), {}});
    }
  }

  // The run's t0 in seconds of steady_clock.
  double t0_s() const { return std::chrono::duration<double>(t0_.time_since_epoch()).count(); }

  void started(std::chrono::steady_clock::time_point t0) override {
    t0_ = t0;
    LinkTrace::event("clock_started");
    // Every rank's workers have placed their buffers (which takes each rank its own time:
    // tens of milliseconds for large graphs): start the tasks together, or a move sent at
    // one rank's start would be timed until the other rank is ready to receive it.
    MPI_Request req;
    MPI_Ibarrier(comm_, &req);
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    for (int done = 0;;) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (done) break;
      if (std::chrono::steady_clock::now() < spin_until)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    LinkTrace::event("start_barrier_passed");
    // The run goes to the communication thread, started at the first run and kept: a
    // thread created for every run queued behind every runnable thread of the machine
    // (the scheduler's debit for a new thread) and its first transfer waited with it,
    // up to a scheduler tick (4 ms) on a loaded machine.
    {
      std::lock_guard<std::mutex> lock(state_mutex_);
      running_ = true;
    }
    if (thread_.joinable())
      bells_.ring(rank_);
    else
      thread_ = std::thread([this] { loop(); });
  }

  void before_task(TaskId task) override {
    if (fault_kill_) ::raise(SIGKILL);
    if (fault_any_ || task.value == fault_task_) fail("injected fault (TESSEL_MPI_FAULT)");
  }

  std::vector<std::byte> send_buffer(std::size_t bytes) override {
    std::vector<std::byte> block;
    {
      // The smallest finished send's block that holds `bytes`: no allocation, no page
      // faults, no zero-filling of a fresh block on every move.
      std::lock_guard<std::mutex> lock(pool_mutex_);
      std::size_t best = pool_.size();
      for (std::size_t i = 0; i < pool_.size(); ++i)
        if (pool_[i].capacity() >= bytes && (best == pool_.size() || pool_[i].capacity() < pool_[best].capacity()))
          best = i;
      if (best < pool_.size()) {
        block = std::move(pool_[best]);
        pool_.erase(pool_.begin() + static_cast<std::ptrdiff_t>(best));
      }
    }
    block.resize(bytes);
    return block;
  }

  void send(TaskId move, std::vector<std::byte> data) override {
    LinkTrace::event("send_handed", move.value, data.size());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      commands_.push_back(Command{Command::send, move.value, std::move(data)});
    }
    bells_.ring(rank_);
  }

  void phase_done(std::int32_t phase) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      commands_.push_back(Command{Command::barrier, phase, {}});
    }
    bells_.ring(rank_);
  }

  void end(bool failed) override {
    stop_thread(failed);
    LinkTrace::event("end");
    LinkTrace::flush(rank_);
    if (failed) {
      // The job is about to be aborted; requests still open are left to MPI_Abort.
      requests_.clear();
      pending_.clear();
    }
    run_ = {};
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  struct Pending {
    enum Kind : std::uint8_t { recv, send, barrier } kind;
    std::int32_t id;               // task (recv, send) or phase (barrier)
    std::vector<std::byte> data;   // send: the packed region, kept until the send completes
  };
  struct Command {
    enum Kind : std::uint8_t { send, barrier } kind;
    std::int32_t id;
    std::vector<std::byte> data;
  };

  bool mine(DeviceId d) const { return d.value >= first_ && d.value < last_; }

  void add(MPI_Request r, Pending p) {
    requests_.push_back(r);
    pending_.push_back(std::move(p));
  }

  // Ends the run on the communication thread (waits for it to finish the run's transfers,
  // unless `abandon`); the thread stays for the next run.
  void stop_thread(bool abandon) {
    if (!thread_.joinable()) return;
    abandon_ = abandon;
    ending_ = true;
    bells_.ring(rank_);
    std::unique_lock<std::mutex> lock(state_mutex_);
    state_cv_.wait(lock, [this] { return !running_; });
  }

  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  // The communication thread (one per link, kept from run to run): during a run it posts
  // what the workers hand over, completes requests and reports arrivals and finished
  // phases, until the run has ended and nothing is open.
  //
  // It polls MPI (MPI_Testsome) only while it knows a transfer is under way — a send or a
  // barrier of its own not yet complete, or a message announced to this rank not yet
  // received (Doorbells) — and for kSpin after anything happened, yielding between polls
  // so that a rank that shares its core with its worker leaves it the core. Otherwise it
  // sleeps on its doorbell, which the other ranks ring when they post a message for it
  // or enter a barrier, and its workers when they hand it a send. A poll that has seen
  // nothing for kSpin while a transfer is under way gives way to timed waits (from
  // kFirstWait, doubling to kLongestWait), so that ranks outnumbering the cores do not
  // spin against each other. Without a shared doorbell segment (ranks on several
  // machines) nothing rings: the idle thread polls every kPollWait.
  static constexpr std::chrono::microseconds kSpin{200};
  static constexpr std::chrono::microseconds kFirstWait{20};
  static constexpr std::chrono::microseconds kLongestWait{1000};
  static constexpr std::chrono::milliseconds kIdleWait{20};  // a safety net: a ring wakes it at once
  static constexpr std::chrono::microseconds kPollWait{50};  // no shared doorbells: nothing rings

  // The communication thread: between runs it sleeps on its doorbell and makes no MPI
  // call (the main thread makes them: MPI_THREAD_SERIALIZED); started() hands it a run
  // (running_), and it hands the run back (running_ false) when the run has ended.
  void loop() {
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);  // timed waits end within ~1 us, not the default 50 us
    if (pin_threads_) {
      // mpirun binds a rank to one core, where its worker runs: let this thread run on
      // any core, so that it can progress a transfer on a core another rank leaves idle
      // while the worker computes.
      cpu_set_t all;
      CPU_ZERO(&all);
      for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c) CPU_SET(c, &all);
      pthread_setaffinity_np(pthread_self(), sizeof all, &all);
    }
    for (;;) {
      for (;;) {
        const std::uint32_t bell = bells_.seen();
        if (quit_) return;
        {
          std::lock_guard<std::mutex> lock(state_mutex_);
          if (running_) break;
        }
        bells_.wait(bell, kIdleWait);
      }
      run_transfers();
      {
        std::lock_guard<std::mutex> lock(state_mutex_);
        running_ = false;
      }
      state_cv_.notify_all();
    }
  }

  // One run's transfers: returns when the run has ended and nothing is open, at once when
  // it is abandoned, or after a failure (reported through run_.failed).
  void run_transfers() {
    std::vector<Command> commands;
    std::vector<int> done(16);
    auto last_event = std::chrono::steady_clock::now();
    std::chrono::microseconds next_wait = kFirstWait;
    std::uint32_t last_bell = bells_.seen();
    try {
      for (;;) {
        const std::uint32_t bell = bells_.seen();  // read before the commands: a later ring ends the wait below
        bool progressed = bell != last_bell;
        last_bell = bell;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          commands.swap(commands_);
        }
        for (Command& c : commands) {
          progressed = true;
          MPI_Request req;
          if (c.kind == Command::send) {
            const Task& t = tg_->tasks[static_cast<std::size_t>(c.id)];
            const int to = rank_of(t.dst_device);
            LinkTrace::event("isend", c.id);
            MPI_Isend(c.data.data(), static_cast<int>(c.data.size()), MPI_BYTE, to, c.id, comm_, &req);
            add(req, Pending{Pending::send, c.id, std::move(c.data)});
            ++sends_open_;
            bells_.announce(to);
          } else {
            MPI_Ibarrier(comm_, &req);
            add(req, Pending{Pending::barrier, c.id, {}});
            ++barriers_open_;
            for (int r = 0; r < ranks_; ++r)
              if (r != rank_) bells_.ring(r);
          }
        }
        commands.clear();
        if (!requests_.empty()) {
          int count = 0;
          done.resize(requests_.size());
          MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, done.data(), MPI_STATUSES_IGNORE);
          if (count > 0 && count != MPI_UNDEFINED) {
            progressed = true;
            // Barriers complete in the order they were entered; report them in phase order.
            std::sort(done.begin(), done.begin() + count);
            for (int k = 0; k < count; ++k) {
              Pending& p = pending_[static_cast<std::size_t>(done[static_cast<std::size_t>(k)])];
              LinkTrace::event(p.kind == Pending::recv   ? "recv_done"
                               : p.kind == Pending::send ? "send_done"
                                                         : "barrier_done",
                               p.id);
              if (p.kind == Pending::recv) {
                run_.received(TaskId(p.id), seconds());
                ++received_;
                // Its sender may wait for the end of the handshake: wake it.
                bells_.ring(rank_of(tg_->tasks[static_cast<std::size_t>(p.id)].device));
              } else if (p.kind == Pending::barrier) {
                --barriers_open_;
                phases_released_ = std::max(phases_released_, p.id + 1);
                run_.released(p.id);
              } else {
                --sends_open_;
                recycle(std::move(p.data));
              }
              p.data = {};
            }
            std::size_t w = 0;
            for (std::size_t i = 0; i < requests_.size(); ++i)
              if (requests_[i] != MPI_REQUEST_NULL) {
                if (w != i) {  // never a self-move: it would free a send's buffer while MPI reads it
                  requests_[w] = requests_[i];
                  pending_[w] = std::move(pending_[i]);
                }
                ++w;
              }
            requests_.resize(w);
            pending_.resize(w);
          }
        }
        if (abandon_) return;
        if (ending_ && !progressed && requests_.empty() && phases_released_ >= num_phases_) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (commands_.empty()) return;
        }
        const auto now = std::chrono::steady_clock::now();
        if (progressed) {
          last_event = now;
          next_wait = kFirstWait;
          continue;
        }
        const bool under_way = sends_open_ > 0 || barriers_open_ > 0 || bells_.announced() > received_;
        if (now - last_event < kSpin) {
          std::this_thread::yield();
        } else if (under_way) {
          LinkTrace::event("wait_underway", -1, next_wait.count());
          bells_.wait(bell, next_wait);
          LinkTrace::event("woke");
          next_wait = std::min(2 * next_wait, kLongestWait);
        } else {
          LinkTrace::event("wait_idle");
          bells_.wait(bell, bells_.shared() ? kIdleWait : kPollWait);
          LinkTrace::event("woke");
        }
      }
    } catch (...) {
      error_ = std::current_exception();
      if (run_.failed) run_.failed(error_);
    }
  }

  // A finished send's block, kept for the next send_buffer (at most kPool blocks).
  static constexpr std::size_t kPool = 16;
  void recycle(std::vector<std::byte> block) {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (pool_.size() < kPool) pool_.push_back(std::move(block));
  }

  MPI_Comm comm_;
  int rank_, ranks_;
  Policy policy_;
  bool pin_threads_;
  int first_ = 0, last_ = 0, devices_ = 1;
  const TaskGraph* tg_ = nullptr;
  RemoteRun run_;
  std::chrono::steady_clock::time_point t0_;
  std::thread thread_;
  std::atomic<bool> ending_{false}, abandon_{false}, quit_{false};
  std::mutex state_mutex_;
  std::condition_variable state_cv_;
  bool running_ = false;  // under state_mutex_: the thread has a run
  std::mutex mutex_;
  std::vector<Command> commands_;  // from the workers, under mutex_
  std::vector<MPI_Request> requests_;
  std::vector<Pending> pending_;
  std::int32_t num_phases_ = 0, phases_released_ = 0;
  std::int64_t sends_open_ = 0, barriers_open_ = 0;  // posted and not yet complete
  std::uint64_t received_ = 0;                        // moves received, all runs: against bells_.announced()
  mpi::Doorbells bells_;
  std::mutex pool_mutex_;
  std::vector<std::vector<std::byte>> pool_;  // finished sends' blocks, for send_buffer
  std::exception_ptr error_;
  bool fault_kill_ = false;
  bool fault_any_ = false;
  std::int64_t fault_task_ = -1;
};

namespace {

struct Fnv {
  std::uint64_t h = 1469598103934665603ULL;
  void bytes(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ULL;
  }
  template <class T>
  void value(const T& v) {
    bytes(&v, sizeof v);
  }
  void rect(const Rect& r) {
    value(r.rank);
    for (int d = 0; d < r.rank; ++d) {
      value(r.offset[d]);
      value(r.size[d]);
    }
  }
};

// "device 3" or "devices 2-3"
std::string devices_text(int first, int last) {
  return last - first == 1 ? "device " + std::to_string(first)
                           : "devices " + std::to_string(first) + "-" + std::to_string(last - 1);
}

MPI_Comm world_dup() {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  return c;
}

}  // namespace

std::uint64_t run_fingerprint(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) {
  Fnv f;
  for (const Node& n : g.nodes()) {
    f.bytes(n.name.data(), n.name.size());
    f.value(n.kind);
    f.value(n.dtype);
    for (auto s : n.shape) f.value(s);
  }
  f.value(tg.num_devices);
  for (const Task& t : tg.tasks) {
    f.value(t.kind);
    f.value(t.device.value);
    f.value(t.dst_device.value);
    f.value(t.node.value);
    f.value(t.writes.value);
    for (BufferId b : t.reads) f.value(b.value);
    f.rect(t.src);
    f.rect(t.dst);
    f.value(t.op);
    f.value(t.agg);
  }
  for (const Buffer& b : tg.buffers) {
    f.value(b.device.value);
    f.value(b.dtype);
    f.value(b.init);
    for (auto s : b.shape) f.value(s);
  }
  for (const auto& [name, t] : inputs) {
    f.bytes(name.data(), name.size());
    f.bytes(t.data.data(), t.data.size() * sizeof(double));
  }
  return f.h;
}

std::pair<int, int> MpiExecutor::devices_of(int rank, int ranks, int devices) {
  auto at = [&](int r) { return static_cast<int>(static_cast<std::int64_t>(r) * devices / ranks); };
  return {at(rank), at(rank + 1)};
}

MpiExecutor::MpiExecutor(Policy policy, bool pin_threads) : policy_(policy) {
  mpi::ensure_initialized();
  rank_ = mpi::rank();
  ranks_ = mpi::size();
  link_ = std::make_unique<MpiLink>(world_dup(), rank_, ranks_, policy, pin_threads);
  CpuOptions o;
  o.policy = policy;
  o.pin_threads = pin_threads;
  o.link = link_.get();
  cpu_ = std::make_unique<CpuExecutor>(o);
}

MpiExecutor::~MpiExecutor() = default;

RunResult MpiExecutor::run(const Graph& g, const TaskGraph& tg, const TensorMap& inputs) {
  check_inputs(g, inputs);
  tg.validate();
  // Collective nodes (LowerOptions::collectives) run as the moves and touches they stand for.
  if (has_lowered_collectives(tg)) return run(g, collectives_as_moves(tg), inputs);
  if (ranks_ > tg.num_devices)
    throw mpi::CollectiveError("--backend mpi: the job has " + std::to_string(ranks_) + " ranks but the task graph only " +
                               std::to_string(tg.num_devices) + " devices (every rank owns at least one): start at most " +
                               std::to_string(tg.num_devices) + " ranks (mpirun -np) or use more devices (-d)");
  LinkTrace::event("run_enter");
  mpi::lazy_barrier();  // rank 0 may still be busy (the reference): wait without spinning
  {
    const std::uint64_t mine = run_fingerprint(g, tg, inputs);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(ranks_));
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 1; r < ranks_; ++r)
      if (all[static_cast<std::size_t>(r)] != all[0])
        throw mpi::CollectiveError(
            "--backend mpi: rank " + std::to_string(r) +
            " was given a different graph, decomposition or inputs than rank 0 (their fingerprints differ): every rank "
            "must run the same command with the same seed and files");
  }
  if (offsets_.empty()) offsets_ = mpi::clock_offsets();
  auto [first, last] = devices_of(rank_, ranks_, tg.num_devices);
  link_->configure(first, last, tg.num_devices);
  LinkTrace::event("barrier_in");
  MPI_Barrier(MPI_COMM_WORLD);  // every rank's clock starts at about the same moment
  LinkTrace::event("barrier_out");
  RunResult r;
  try {
    r = cpu_->run(g, tg, inputs);
  } catch (const ResourceError& e) {
    mpi::abort_job(devices_text(first, last) + ": " + e.what(), 3);
    throw;
  } catch (const std::exception& e) {
    mpi::abort_job(devices_text(first, last) + ": " + e.what(), 1);
    throw;
  }
  // Outputs to rank 0: each rank's output blocks, in task order, as one message.
  constexpr int kOutTag = 3, kSpanTag = 4;
  if (rank_ != 0) {
    std::vector<double> out;
    for (const Task& t : tg.tasks) {
      if (t.kind != TaskKind::output || t.device.value < first || t.device.value >= last) continue;
      const Tensor& whole = r.outputs.at(g.node(t.node).name);
      Tensor piece(t.src.shape(), whole.dtype);
      copy_region(whole, t.src, piece, Rect::whole(piece.shape));
      out.insert(out.end(), piece.data.begin(), piece.data.end());
    }
    if (out.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      mpi::abort_job("outputs too large to gather in one message", 1);
    MPI_Send(out.data(), static_cast<int>(out.size()), MPI_DOUBLE, 0, kOutTag, MPI_COMM_WORLD);
  } else {
    for (int q = 1; q < ranks_; ++q) {
      auto [qf, ql] = devices_of(q, ranks_, tg.num_devices);
      std::size_t total = 0;
      for (const Task& t : tg.tasks)
        if (t.kind == TaskKind::output && t.device.value >= qf && t.device.value < ql)
          total += static_cast<std::size_t>(elements(t.src.shape()));
      std::vector<double> in(total);
      MPI_Recv(in.data(), static_cast<int>(total), MPI_DOUBLE, q, kOutTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::size_t at = 0;
      for (const Task& t : tg.tasks) {
        if (t.kind != TaskKind::output || t.device.value < qf || t.device.value >= ql) continue;
        Tensor& whole = r.outputs.at(g.node(t.node).name);
        Tensor piece(t.src.shape(), whole.dtype);
        std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(at), piece.data.size(), piece.data.begin());
        at += piece.data.size();
        copy_region(piece, Rect::whole(piece.shape), whole, t.src);
      }
    }
  }

  // Timelines to rank 0: each rank's spans in seconds since its own run's t0, behind
  // that t0 on its own clock; rank 0 moves every rank's t0 onto its clock (less the
  // rank's offset) and counts from the earliest.
  std::vector<double> mine;
  mine.reserve(1 + 5 * r.timeline.spans.size());
  mine.push_back(link_->t0_s());
  for (const Span& sp : r.timeline.spans) {
    mine.push_back(sp.task.value);
    mine.push_back(sp.device.value);
    mine.push_back(static_cast<double>(static_cast<int>(sp.lane)));
    mine.push_back(sp.start_s);
    mine.push_back(sp.end_s);
  }
  if (rank_ != 0) {
    MPI_Send(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, 0, kSpanTag, MPI_COMM_WORLD);
    r.outputs.clear();
    r.timeline.spans.clear();
  } else {
    std::vector<std::vector<double>> all(static_cast<std::size_t>(ranks_));
    all[0] = std::move(mine);
    for (int q = 1; q < ranks_; ++q) {
      MPI_Status st;
      MPI_Probe(q, kSpanTag, MPI_COMM_WORLD, &st);
      int count = 0;
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      all[static_cast<std::size_t>(q)].resize(static_cast<std::size_t>(count));
      MPI_Recv(all[static_cast<std::size_t>(q)].data(), count, MPI_DOUBLE, q, kSpanTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    double base = std::numeric_limits<double>::infinity();
    for (int q = 0; q < ranks_; ++q) base = std::min(base, all[static_cast<std::size_t>(q)][0] - offsets_[static_cast<std::size_t>(q)]);
    // A move between ranks has a span on each side (packing on the source rank, arrival
    // on the destination's): one span from the first start to the last end.
    std::vector<std::int64_t> at(tg.tasks.size(), -1);
    std::vector<Span> spans;
    for (int q = 0; q < ranks_; ++q) {
      const std::vector<double>& v = all[static_cast<std::size_t>(q)];
      const double shift = v[0] - offsets_[static_cast<std::size_t>(q)] - base;
      for (std::size_t k = 1; k + 5 <= v.size(); k += 5) {
        Span sp{TaskId(static_cast<std::int32_t>(v[k])), DeviceId(static_cast<std::int32_t>(v[k + 1])),
                static_cast<Lane>(static_cast<int>(v[k + 2])), v[k + 3] + shift, v[k + 4] + shift};
        std::int64_t& slot = at[sp.task.index()];
        if (slot < 0) {
          slot = static_cast<std::int64_t>(spans.size());
          spans.push_back(sp);
        } else {
          Span& s0 = spans[static_cast<std::size_t>(slot)];
          s0.start_s = std::min(s0.start_s, sp.start_s);
          s0.end_s = std::max(s0.end_s, sp.end_s);
        }
      }
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.task < b.task; });
    r.timeline.spans = std::move(spans);
  }
  LinkTrace::event("run_exit");
  LinkTrace::flush(rank_);
  r.timeline.source = std::string("mpi-") + std::string(to_string(policy_));
  return r;
}

}  // namespace tessel::runtime

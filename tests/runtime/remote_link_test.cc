// The CPU executor split over "processes" through RemoteLink, without MPI: a loopback
// hub stands in for the MPI backend's communication (runtime/mpi/), so the split run —
// only local workers, moves packed and handed over, arrivals finishing moves, bsp phases
// ended by every part — is checked in every build, sanitizer builds included.
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "core/partition.h"
#include "core/task_graph.h"
#include "core/workloads.h"
#include "runtime/cpu_executor.h"
#include "tests/support/all_to_all.h"

namespace tessel::runtime {
namespace {

std::pair<int, int> devices_of(int part, int parts, int devices) {
  return {part * devices / parts, (part + 1) * devices / parts};
}

// What the parts share: messages by destination part and task, and the phases each part
// has reported done.
struct Hub {
  explicit Hub(int n) : parts(n), inbox(static_cast<std::size_t>(n)) {}
  int parts;
  std::mutex mutex;
  std::vector<std::map<std::int32_t, std::vector<std::byte>>> inbox;
  std::map<std::int32_t, int> phase_done;
};

class LoopbackLink final : public RemoteLink {
 public:
  LoopbackLink(Hub& hub, int part, int devices, Policy policy)
      : hub_(hub), part_(part), devices_(devices), policy_(policy) {
    std::tie(first_, last_) = devices_of(part, hub.parts, devices);
  }
  ~LoopbackLink() override { stop(); }
  [[nodiscard]] int first_device() const override { return first_; }
  [[nodiscard]] int last_device() const override { return last_; }
  void begin(const TaskGraph& tg, RemoteRun run) override {
    tg_ = &tg;
    run_ = std::move(run);
    if (policy_ == Policy::bsp)
      for (const Task& t : tg.tasks) phases_ = std::max(phases_, bsp_phase(t) + 1);
    for (std::size_t i = 0; i < tg.tasks.size(); ++i) {
      const Task& t = tg.tasks[i];
      if (t.kind == TaskKind::move && mine(t.dst_device) && !mine(t.device))
        expected_[static_cast<std::int32_t>(i)] = run_.buffer(t.writes);
    }
  }
  void started(std::chrono::steady_clock::time_point t0) override {
    t0_ = t0;
    thread_ = std::thread([this] { loop(); });
  }
  void before_task(TaskId) override {}
  void send(TaskId move, std::vector<std::byte> data) override {
    const Task& t = tg_->tasks[move.index()];
    const int to = part_of(t.dst_device);
    std::lock_guard<std::mutex> lock(hub_.mutex);
    hub_.inbox[static_cast<std::size_t>(to)][move.value] = std::move(data);
    ++sent_;
    order_.push_back(move.value);
  }
  void phase_done(std::int32_t phase) override {
    std::lock_guard<std::mutex> lock(hub_.mutex);
    ++hub_.phase_done[phase];
  }
  void end(bool failed) override {
    abandon_ = failed;
    stop();
  }
  int sent() const { return sent_; }
  // The moves handed to send(), in the order the workers sent them.
  const std::vector<std::int32_t>& order() const { return order_; }

 private:
  bool mine(DeviceId d) const { return d.value >= first_ && d.value < last_; }
  int part_of(DeviceId d) const {
    for (int p = 0; p < hub_.parts; ++p)
      if (d.value < devices_of(p, hub_.parts, devices_).second) return p;
    return hub_.parts - 1;
  }
  void stop() {
    ending_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void loop() {
    for (;;) {
      std::vector<std::pair<std::int32_t, std::vector<std::byte>>> arrived;
      bool release = false;
      {
        std::lock_guard<std::mutex> lock(hub_.mutex);
        auto& box = hub_.inbox[static_cast<std::size_t>(part_)];
        for (auto it = box.begin(); it != box.end();) {
          arrived.emplace_back(it->first, std::move(it->second));
          it = box.erase(it);
        }
        release = released_ < phases_ && hub_.phase_done[released_] == hub_.parts;
      }
      for (auto& [task, data] : arrived) {
        std::memcpy(expected_.at(task), data.data(), data.size());
        expected_.erase(task);
        run_.received(TaskId(task), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
      }
      if (release) run_.released(released_++);
      if (abandon_ || (ending_ && expected_.empty() && released_ >= phases_)) return;
      if (arrived.empty() && !release) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  Hub& hub_;
  int part_, devices_;
  Policy policy_;
  int first_ = 0, last_ = 0;
  const TaskGraph* tg_ = nullptr;
  RemoteRun run_;
  std::chrono::steady_clock::time_point t0_;
  std::map<std::int32_t, void*> expected_;
  std::int32_t phases_ = 0, released_ = 0;
  std::thread thread_;
  std::atomic<bool> ending_{false}, abandon_{false};
  int sent_ = 0;
  std::vector<std::int32_t> order_;
};


TEST(RemoteLink, SplitRunsMatchTheReferenceUnderBothPolicies) {
  for (const char* w : {"chain:size=48", "chain-sum:size=40", "ffn:tokens=24,dim=16,hidden=40",
                        "llama-block:model=tiny,seq=8", "chain:size=40,dtype=f64"}) {
    const Graph g = build_workload(w);
    const TensorMap inputs = random_inputs(g, 5);
    const TensorMap want = evaluate_reference(g, inputs);
    for (auto [devices, parts] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{4, 4}, std::pair{3, 2}}) {
      const TaskGraph tg = lower(g, split_largest(g, devices));
      for (Policy p : {Policy::async, Policy::bsp}) {
        const std::string label = std::string(w) + " d=" + std::to_string(devices) + " parts=" + std::to_string(parts) +
                                  " " + std::string(to_string(p));
        Hub hub(parts);
        std::vector<std::unique_ptr<LoopbackLink>> links;
        std::vector<RunResult> results(static_cast<std::size_t>(parts));
        std::vector<std::thread> threads;
        for (int r = 0; r < parts; ++r) links.push_back(std::make_unique<LoopbackLink>(hub, r, devices, p));
        for (int r = 0; r < parts; ++r)
          threads.emplace_back([&, r] {
            CpuOptions o;
            o.policy = p;
            o.pin_threads = false;
            o.link = links[static_cast<std::size_t>(r)].get();
            results[static_cast<std::size_t>(r)] = CpuExecutor(o).run(g, tg, inputs);
          });
        for (auto& t : threads) t.join();
        // Each part wrote its own devices' output blocks (zeros elsewhere): their sum is
        // the output; each part's spans are the tasks it ran or received.
        int moves_between = 0;
        for (const Task& t : tg.tasks)
          if (t.kind == TaskKind::move) {
            int a = 0, b = 0;
            for (int r = 0; r < parts; ++r) {
              auto [f, l] = devices_of(r, parts, devices);
              if (t.device.value >= f && t.device.value < l) a = r;
              if (t.dst_device.value >= f && t.dst_device.value < l) b = r;
            }
            moves_between += a != b;
          }
        int sent = 0;
        for (const auto& l : links) sent += l->sent();
        EXPECT_EQ(sent, moves_between) << label;
        for (NodeId id : g.outputs()) {
          const std::string& name = g.node(id).name;
          Tensor sum = results[0].outputs.at(name);
          for (int r = 1; r < parts; ++r)
            for (std::size_t k = 0; k < sum.data.size(); ++k)
              sum.data[k] += results[static_cast<std::size_t>(r)].outputs.at(name).data[k];
          const Difference d = compare(sum, want.at(name));
          EXPECT_LE(d.normwise_rel, 1e-5) << label << " output " << name;
        }
        std::size_t spans = 0;
        for (const RunResult& r : results) spans += r.timeline.spans.size();
        EXPECT_EQ(spans, tg.tasks.size() + static_cast<std::size_t>(moves_between)) << label;
      }
    }
  }
}

// A split run whose parts hold one device each: a part's outgoing moves are ready at once
// (its input block's task pushes them all) and leave in the ready queue's order. In the
// lowered all-to-all they tie on priority, so core's stagger (core/ready_order.h) orders
// them: device p sends to p + 1, p + 2, ... (mod n), as the simulator's comm lanes do — in
// task order every device would send to device 0 first (tests/sim/stagger_test.cc).
TEST(RemoteLink, AllToAllMovesLeaveEachDeviceInStaggerOrder) {
  const int n = 6;
  const testing::AllToAll a = testing::lowered_all_to_all(n, 8);
  const Graph& g = a.graph;
  const TaskGraph& tg = a.tg;
  const TensorMap inputs = random_inputs(g, 5);
  Hub hub(n);
  std::vector<std::unique_ptr<LoopbackLink>> links;
  std::vector<RunResult> results(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) links.push_back(std::make_unique<LoopbackLink>(hub, r, n, Policy::async));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      CpuOptions o;
      o.pin_threads = false;
      o.link = links[static_cast<std::size_t>(r)].get();
      results[static_cast<std::size_t>(r)] = CpuExecutor(o).run(g, tg, inputs);
    });
  for (auto& t : threads) t.join();
  for (int p = 0; p < n; ++p) {
    const std::vector<std::int32_t>& sent = links[static_cast<std::size_t>(p)]->order();
    ASSERT_EQ(sent.size(), static_cast<std::size_t>(n - 1)) << "device " << p;
    for (int k = 1; k < n; ++k) {
      const Task& t = tg.tasks[static_cast<std::size_t>(sent[static_cast<std::size_t>(k - 1)])];
      EXPECT_EQ(t.device.value, p);
      EXPECT_EQ(t.dst_device.value, (p + k) % n) << "device " << p << ", step " << k;
    }
  }
}

}  // namespace
}  // namespace tessel::runtime

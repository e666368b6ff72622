#pragma once
// Doorbells: how the communication threads of an MPI job's ranks wake each other.
//
// MPI moves data only while the ranks involved call into it: OpenMPI's shared-memory
// transport (btl/vader) copies a message of more than its eager limit (4 KiB) only after
// a handshake that needs the sender's and the receiver's progress calls alike. A thread
// that waits for such a message by polling MPI either burns its core the whole time or,
// sleeping between polls, adds its sleep to every step of the handshake (that was ~0.6 ms
// a move of 8 KiB). So each rank's communication thread sleeps on its doorbell — a futex
// word in a shared-memory segment of the job's ranks — and the rank that posts a message
// for it rings it; it then polls MPI only while it knows a transfer is under way.
//
// Each rank has one slot: `bell` (the futex word, rung by other ranks and by the rank's
// own workers when they hand it work), `sleeping` (set while its thread waits, so that a
// ring makes the wake-up call only then) and `announced` (messages posted to the rank so
// far: while more were announced than it has received, a transfer is under way).
//
// The segment is POSIX shared memory (shm_open, /dev/shm/tessel-bells-PID-N with PID rank
// 0's process id) made by rank 0 and mapped by every rank; rank 0 unlinks it as soon as
// every rank has mapped it. A segment whose rank 0 died before that (killed during setup)
// is removed by the next job's rank 0 on the machine: one whose PID no longer exists.
// A segment is made only where every rank of the communicator runs on the same machine
// (MPI's MPI_COMM_TYPE_SHARED split). Otherwise, or where the segment cannot be made, only the
// rank's own bell works (its workers can still wake it), ring() of another rank does
// nothing, and announced() stays 0: the caller must poll (shared() says which).

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace tessel::runtime::mpi {

class Doorbells {
 public:
  // Collective over `comm` (every rank constructs it at the same point).
  explicit Doorbells(MPI_Comm comm);
  ~Doorbells();
  Doorbells(const Doorbells&) = delete;
  Doorbells& operator=(const Doorbells&) = delete;

  // Whether other ranks can ring this one (one machine, segment mapped).
  [[nodiscard]] bool shared() const { return shared_; }
  // This rank's bell as it reads now: pass it to wait().
  [[nodiscard]] std::uint32_t seen() const;
  // Rings rank r's bell (this rank's own from any of its threads); wakes its thread if it waits.
  void ring(int r);
  // Tells rank r that a message for it has been posted, then rings it.
  void announce(int r);
  // Messages announced to this rank so far.
  [[nodiscard]] std::uint64_t announced() const;
  // Waits until this rank's bell differs from `seen` or `timeout` has passed (or spuriously).
  void wait(std::uint32_t seen, std::chrono::nanoseconds timeout);

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint32_t> bell{0};
    std::atomic<std::uint32_t> sleeping{0};
    std::atomic<std::uint64_t> announced{0};
  };
  static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::uint64_t>::is_always_lock_free);

  Slot* slot(int r) const { return shared_ ? &slots_[r] : (r == rank_ ? own_.get() : nullptr); }

  int rank_ = 0;
  int ranks_ = 1;
  bool shared_ = false;
  Slot* slots_ = nullptr;  // the mapped segment: one slot per rank
  std::size_t mapped_bytes_ = 0;
  std::unique_ptr<Slot> own_;  // without a segment: this rank's slot in process memory
};

}  // namespace tessel::runtime::mpi

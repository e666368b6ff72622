#include "runtime/mpi/doorbell.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tessel::runtime::mpi {
namespace {

// FUTEX_WAIT / FUTEX_WAKE on a word; `shared`: the word may be mapped by other processes
// (no FUTEX_PRIVATE_FLAG).
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::chrono::nanoseconds timeout, bool shared) {
  const auto ns = std::max<std::int64_t>(0, timeout.count());
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, expected,
                &ts, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>* word, bool shared) {
  (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX,
                nullptr, nullptr, 0);
}

constexpr const char* kPrefix = "tessel-bells-";  // then the creator's pid, '-', a counter

// Removes the segments of jobs whose rank 0 died between making its segment and unlinking
// it (killed during setup, or aborted by another rank's failure there). A name carries
// its creator's pid: a segment whose creator no longer exists is stale. (A pid reused by
// a live process keeps its stale segment; only ever too little is removed.)
void remove_stale_segments() {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  const std::size_t prefix = std::strlen(kPrefix);
  while (const dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, kPrefix, prefix) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(e->d_name + prefix, &end, 10);
    if (pid <= 0 || *end != '-' || pid == static_cast<long>(getpid())) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask)
    char name[300];
    std::snprintf(name, sizeof name, "/%s", e->d_name);
    (void)shm_unlink(name);
  }
  closedir(dir);
}

// Tests: TESSEL_MPI_FAULT=0:setup kills rank 0 right after it has made the segment.
bool killed_in_setup(int rank) {
  const char* f = std::getenv("TESSEL_MPI_FAULT");
  return f && rank == 0 && std::strcmp(f, "0:setup") == 0;
}

}  // namespace

Doorbells::Doorbells(MPI_Comm comm) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &ranks_);
  // One machine? Every rank sees the same answer (its node's share of the communicator).
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_ranks = 0;
  MPI_Comm_size(node, &node_ranks);
  MPI_Comm_free(&node);
  if (node_ranks == ranks_) {
    static std::atomic<int> made{0};  // several executors in one process: one segment each
    mapped_bytes_ = sizeof(Slot) * static_cast<std::size_t>(ranks_);
    char name[64] = {};
    if (rank_ == 0) {
      remove_stale_segments();
      std::snprintf(name, sizeof name, "/%s%ld-%d", kPrefix, static_cast<long>(getpid()), made.fetch_add(1));
    }
    void* at = MAP_FAILED;
    if (rank_ == 0) {
      const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd >= 0) {
        if (ftruncate(fd, static_cast<off_t>(mapped_bytes_)) == 0)
          at = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
      }
      if (killed_in_setup(rank_)) ::raise(SIGKILL);
      if (at != MAP_FAILED) {
        auto* slots = static_cast<Slot*>(at);
        for (int r = 0; r < ranks_; ++r) new (&slots[r]) Slot();
      } else {
        if (fd >= 0) shm_unlink(name);
        name[0] = '\0';  // tells the others there is no segment
      }
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
    if (rank_ != 0 && name[0] != '\0') {
      const int fd = shm_open(name, O_RDWR, 0600);
      if (fd >= 0) {
        at = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
      }
    }
    int mapped = at != MAP_FAILED ? 1 : 0, all = 0;
    MPI_Allreduce(&mapped, &all, 1, MPI_INT, MPI_MIN, comm);
    if (rank_ == 0 && name[0] != '\0') shm_unlink(name);  // every rank has mapped it (or given up)
    if (all) {
      shared_ = true;
      slots_ = static_cast<Slot*>(at);
    } else if (at != MAP_FAILED) {
      munmap(at, mapped_bytes_);
    }
  }
  if (!shared_) own_ = std::make_unique<Slot>();
}

Doorbells::~Doorbells() {
  if (slots_) munmap(slots_, mapped_bytes_);
}

std::uint32_t Doorbells::seen() const { return slot(rank_)->bell.load(std::memory_order_seq_cst); }

std::uint64_t Doorbells::announced() const { return slot(rank_)->announced.load(std::memory_order_acquire); }

void Doorbells::ring(int r) {
  Slot* s = slot(r);
  if (!s) return;
  s->bell.fetch_add(1, std::memory_order_seq_cst);
  // With wait()'s store to `sleeping` then load of `bell` (both seq_cst): either this
  // sees the waiter asleep and wakes it, or the waiter sees the new bell and does not sleep.
  if (s->sleeping.load(std::memory_order_seq_cst)) futex_wake(&s->bell, shared_);
}

void Doorbells::announce(int r) {
  Slot* s = slot(r);
  if (!s) return;
  s->announced.fetch_add(1, std::memory_order_release);
  ring(r);
}

void Doorbells::wait(std::uint32_t seen, std::chrono::nanoseconds timeout) {
  Slot* s = slot(rank_);
  s->sleeping.store(1, std::memory_order_seq_cst);
  if (s->bell.load(std::memory_order_seq_cst) == seen) futex_wait(&s->bell, seen, timeout, shared_);
  s->sleeping.store(0, std::memory_order_seq_cst);
}

}  // namespace tessel::runtime::mpi

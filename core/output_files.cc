#include "core/output_files.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace tessel {

namespace {

// What a signal that ends the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE — a reader
// of standard output that went away while commit() wrote to it) would otherwise leave
// behind: the temporaries staged but not yet renamed into place, and the folders a batch
// created for them. The handler removes them (unlink and rmdir are async-signal-safe; a
// folder that holds anything stays), then lets the signal end the process as it would
// have. Installed on first use, and only where the signal has its default action (a
// process started under nohup keeps ignoring SIGHUP).
constexpr int kTemporarySlots = 1024, kFolderSlots = 64;
std::atomic<char*> g_temporaries[kTemporarySlots];
std::atomic<char*> g_folders[kFolderSlots];

extern "C" void remove_on_signal(int sig) {
  for (auto& slot : g_temporaries)
    if (char* p = slot.load()) ::unlink(p);
  for (int i = kFolderSlots; i-- > 0;)
    if (char* p = g_folders[i].load()) ::rmdir(p);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_signal_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = remove_on_signal;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

// SigintFlag's state: a handler can reach nothing else.
volatile std::sig_atomic_t g_sigint_seen = 0;
struct sigaction g_sigint_before {};

extern "C" void note_sigint(int) {
  g_sigint_seen = 1;
  ::sigaction(SIGINT, &g_sigint_before, nullptr);  // the next one acts as before
}

// Remembers `path` for the signal handler (a full table remembers nothing more: the file
// is still removed on every other way out).
void remember(std::atomic<char*>* slots, int count, const std::string& path) {
  install_signal_cleanup();
  char* copy = ::strdup(path.c_str());
  if (copy == nullptr) return;
  for (int i = 0; i < count; ++i) {
    char* expected = nullptr;
    if (slots[i].compare_exchange_strong(expected, copy)) return;
  }
  std::free(copy);
}
// The copy is not freed: a handler running on another thread may be reading it (a path
// per output file a command writes).
void forget(std::atomic<char*>* slots, int count, const std::string& path) {
  for (int i = 0; i < count; ++i) {
    char* p = slots[i].load();
    if (p != nullptr && path == p && slots[i].compare_exchange_strong(p, nullptr)) {
      static std::mutex m;  // kept reachable, not freed (and not a leak to LeakSanitizer)
      static auto* retired = new std::vector<char*>;
      const std::lock_guard<std::mutex> lock(m);
      retired->push_back(p);
      return;
    }
  }
}
}  // namespace

SigintFlag::SigintFlag() {
  install_signal_cleanup();  // first, so that the action restored is the cleanup's
  g_sigint_seen = 0;
  struct sigaction now {};
  // An ignored SIGINT (a background job of a shell without job control) stays ignored.
  if (::sigaction(SIGINT, nullptr, &now) != 0 || (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN)) return;
  struct sigaction sa {};
  sa.sa_handler = note_sigint;
  sigemptyset(&sa.sa_mask);
  installed_ = ::sigaction(SIGINT, &sa, &g_sigint_before) == 0;
}
SigintFlag::~SigintFlag() {
  if (installed_) ::sigaction(SIGINT, &g_sigint_before, nullptr);
}
bool SigintFlag::interrupted() const { return g_sigint_seen != 0; }

namespace {

void remember_temporary(const std::string& path) { remember(g_temporaries, kTemporarySlots, path); }
void forget_temporary(const std::string& path) { forget(g_temporaries, kTemporarySlots, path); }

// Writes all of `content` to the open descriptor `fd`; false on any error (errno set).
bool write_all(int fd, std::string_view content) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

[[noreturn]] void fail_errno(const std::string& path, const char* what) {
  fail(path, ": ", what, ": ", std::strerror(errno));
}

// Writes straight into an existing node that is no regular file (a device, a FIFO, a
// dangling symlink's target): it is opened and written as it is, never replaced.
void write_through(const std::string& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail_errno(path, "cannot open for writing");
  const bool ok = write_all(fd, content);
  const int saved = errno;
  if (::close(fd) != 0 && ok) fail_errno(path, "write failed");
  errno = saved;
  if (!ok) fail_errno(path, "write failed");
}

// Writes `content` to PATH.tmp-tessel and returns that name; on failure removes it and
// fails naming `path`.
std::string write_beside(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp-tessel";
  remember_temporary(tmp);  // before it exists: a signal from here on removes it
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int saved = errno;
    forget_temporary(tmp);
    errno = saved;
    fail_errno(path, "cannot open for writing");
  }
  bool ok = write_all(fd, content);
  int saved = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    forget_temporary(tmp);
    errno = saved;
    fail_errno(path, "write failed");
  }
  return tmp;
}

// Where `path` is written: a symlink's regular target (resolved), else the path itself;
// `through` is set for what cannot be replaced by a rename (stdout, a device, a FIFO, a
// socket, a dangling link).
std::string write_target(const std::string& path, bool* through) {
  *through = false;
  if (path == "-") {
    *through = true;
    return path;
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return path;  // a new file
  if (S_ISDIR(st.st_mode)) fail(path, ": is a directory");
  if (S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) {
      *through = true;  // dangling: its target is created through the link
      return path;
    }
    return write_target(resolved, through);
  }
  if (!S_ISREG(st.st_mode)) *through = true;
  return path;
}

// The key two paths of one file share: absolute, `.`/`..` and links of the existing part
// resolved.
std::string same_file_key(const std::string& path) {
  if (path == "-") return path;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  if (ec) return std::filesystem::absolute(path).lexically_normal().string();
  return p.string();
}

}  // namespace

void check_can_write(const std::string& path) {
  if (path.empty()) fail("output path is empty");
  if (path == "-") return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) fail(path, ": is a directory");
    if (S_ISLNK(st.st_mode)) {
      // A link is written through: its target's place is what must hold. A loop, or a
      // dangling link into a folder that does not exist, fails now, not after the work.
      char resolved[PATH_MAX];
      if (::realpath(path.c_str(), resolved) != nullptr) return check_can_write(resolved);
      if (errno == ELOOP) fail_errno(path, "cannot open for writing");
      if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
        char target[PATH_MAX];
        const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
        if (n > 0) {
          target[n] = '\0';
          std::filesystem::path t(target);
          if (t.is_relative()) t = std::filesystem::path(path).parent_path() / t;
          std::error_code ec;
          const std::filesystem::path parent = t.parent_path().empty() ? "." : t.parent_path();
          if (!std::filesystem::is_directory(parent, ec))
            fail(path, ": cannot open for writing: the link points into ", parent.string(), ", which is no folder");
        }
      }
      return;
    }
    if (!S_ISREG(st.st_mode)) return;  // a device, FIFO or socket: written through
  }
  const std::string tmp = path + ".tmp-tessel";
  remember_temporary(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int saved = errno;
    forget_temporary(tmp);
    errno = saved;
    fail_errno(path, "cannot open for writing");
  }
  ::close(fd);
  std::remove(tmp.c_str());
  forget_temporary(tmp);
}

void write_file_atomic(const std::string& path, std::string_view content) {
  if (path.empty()) fail("output path is empty");
  if (path == "-") {  // standard output
    std::fflush(stdout);
    if (!write_all(STDOUT_FILENO, content)) fail_errno("standard output", "write failed");
    return;
  }
  // A symlink writes the file it names (the link stays); a device, FIFO, socket or dangling
  // link is written through; a regular file or a new one gets a temporary beside it, renamed
  // into place, so that a failed write leaves the old file (or none), never a partial one.
  bool through = false;
  const std::string target = write_target(path, &through);
  if (through) return write_through(target, content);
  const std::string tmp = write_beside(target, content);
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int saved = errno;
    std::remove(tmp.c_str());
    forget_temporary(tmp);
    errno = saved;
    fail_errno(path, "cannot move the finished file into place");
  }
  forget_temporary(tmp);
}

OutputBatch::OutputBatch(std::vector<std::pair<std::string, std::string>> inputs) {
  std::error_code ec;  // a name that is no file (a machine preset, say) is no input file
  for (auto& [option, path] : inputs)
    if (!path.empty() && path != "-" && std::filesystem::exists(path, ec)) claim(option, path, /*input=*/true);
}

OutputBatch::~OutputBatch() {
  if (!committed_) {
    for (const Staged& s : staged_)
      if (!s.temporary.empty() && !s.placed) {
        std::remove(s.temporary.c_str());
        forget_temporary(s.temporary);
      }
    std::error_code ec;  // a folder that holds anything stays
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) std::filesystem::remove(*it, ec);
  }
  for (const std::string& dir : created_) forget(g_folders, kFolderSlots, dir);  // removed (or kept) first
}

void OutputBatch::claim(std::string_view option, const std::string& path, bool input) {
  const std::string key = same_file_key(path);
  for (const Claim& c : claimed_) {
    if (c.key != key) continue;
    if (c.input)
      fail(option, " ", path, ": the same file as the input ", c.option, " ", c.path,
           ", which a failed or finished run would overwrite; write the output elsewhere");
    fail(option, " ", path, ": the same file as ", c.option, " ", c.path, "; give each output its own path");
  }
  claimed_.push_back({std::string(option), path, key, input});
}

bool OutputBatch::declared(const std::string& path) const {
  const std::string key = same_file_key(path);
  for (const Claim& c : claimed_)
    if (!c.input && c.key == key) return true;
  return false;
}

void OutputBatch::add(std::string_view option, const std::string& path) {
  if (path.empty()) return;
  check_can_write(path);
  claim(option, path, /*input=*/false);
}

void OutputBatch::add_folder(std::string_view option, const std::string& dir) {
  if (dir.empty()) fail(option, ": the folder name is empty");
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) fail(option, " ", dir, ": exists and is not a folder");
  } else {
    // The folders that do not exist yet, outermost first, so that a failed batch removes
    // exactly those it made.
    std::vector<std::filesystem::path> missing;
    std::error_code ec;
    for (std::filesystem::path p = std::filesystem::absolute(dir, ec).lexically_normal();
         !p.empty() && !std::filesystem::exists(p, ec); p = p.parent_path()) {
      missing.insert(missing.begin(), p);
      if (p == p.parent_path()) break;
    }
    for (const auto& p : missing) {
      const bool made = std::filesystem::create_directory(p, ec);
      if (ec) fail(option, " ", dir, ": cannot create the folder ", p.string(), ": ", ec.message());
      if (made) {  // one that appeared meanwhile is not ours to remove
        created_.push_back(p.string());
        remember(g_folders, kFolderSlots, p.string());
      }
    }
  }
  check_can_write((std::filesystem::path(dir) / ".tessel-write-check").string());
  folders_.emplace_back(std::string(option), same_file_key(dir));
}

void OutputBatch::stage(const std::string& path, std::string_view content) {
  if (!declared(path)) {
    const std::string parent = same_file_key(std::filesystem::path(path).parent_path().empty()
                                                 ? std::string(".")
                                                 : std::filesystem::path(path).parent_path().string());
    const std::string* option = nullptr;
    for (const auto& [o, key] : folders_)
      if (key == parent) option = &o;
    if (option == nullptr) fail("internal: output ", path, " was not declared to its batch");
    claim(*option, path, /*input=*/false);  // an input of the same path stays refused
  }
  bool through = false;
  const std::string target = write_target(path, &through);
  // One file staged twice is two outputs of one path (a Chakra folder holding --graph-out,
  // say): one would be lost.
  const std::string key = same_file_key(target);
  for (const Staged& s : staged_)
    if (s.key == key) fail(path, ": two outputs of this command are this one file; give each its own path");
  Staged s;
  s.path = target;
  s.key = key;
  if (through) s.content = std::string(content);
  else s.temporary = write_beside(target, content);
  staged_.push_back(std::move(s));
}

void OutputBatch::commit() {
  // What is written through (stdout, devices, FIFOs, dangling links) first: it is what can
  // still fail (/dev/full), and until the renames every regular file is as it was.
  for (Staged& s : staged_)
    if (s.temporary.empty()) write_file_atomic(s.path, s.content);
  for (Staged& s : staged_) {
    if (s.temporary.empty()) continue;
    if (std::rename(s.temporary.c_str(), s.path.c_str()) != 0) fail_errno(s.path, "cannot move the finished file into place");
    s.placed = true;
    forget_temporary(s.temporary);
  }
  committed_ = true;
}

}  // namespace tessel

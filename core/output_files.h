#pragma once
// Writing a command's output files so that a failure loses nothing: one file at a time
// (write_file_atomic), and every file of one command together or none (OutputBatch).

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel {

// Writes `content` to `path`. A regular file (or a new one) is written to a temporary
// file beside it and renamed into place, so that a failure never leaves a partial file.
// Anything else is written through, never replaced: a device or FIFO is opened and
// written (`/dev/full` fails with its error), a symlink writes the file it names (that
// one atomically when it is a regular file). "-" writes to standard output. Error naming
// the path and the system's reason on any failure.
void write_file_atomic(const std::string& path, std::string_view content);
// Fails now, with write_file_atomic's error, where writing `path` later would fail for
// its place (an empty path, a directory, a folder that does not exist or cannot be
// written): commands that measure or search for a while call it before they start, so
// that a mistyped -o costs a second, not the run. Writes nothing ("-", devices, FIFOs and
// links pass; a regular or new file: its temporary is created beside it and removed).
void check_can_write(const std::string& path);

// While one is alive, the first SIGINT (Ctrl-C) only sets interrupted(), which a long
// command polls to stop where it can (sweep: after the points under way), and a second
// does what SIGINT did before it was made: with the default action, the output cleanup
// (OutputBatch's staged temporaries and the folders it made removed), then the end of the
// process. A SIGINT the process ignores stays ignored. One at a time; made and destroyed
// on the main thread.
class SigintFlag {
 public:
  SigintFlag();
  ~SigintFlag();
  SigintFlag(const SigintFlag&) = delete;
  SigintFlag& operator=(const SigintFlag&) = delete;
  [[nodiscard]] bool interrupted() const;

 private:
  bool installed_ = false;  // false where SIGINT was ignored: it stays so
};

// The files one command writes, committed together, so that a command that fails after
// writing some of them leaves every file as it was (and creates none):
//   OutputBatch out({{"-g", graph_path}});     // the files it reads
//   out.add("--trace", trace_path);            // before any work: checked, duplicates refused
//   out.add_folder("--chakra", dir);           // created now, removed again unless committed
//   ... compute ...
//   out.stage(trace_path, text);               // written beside its path (PATH.tmp-tessel)
//   out.commit();                              // every staged file renamed into place
// A batch destroyed before commit() (an Error on the way) removes its temporaries and
// the folders it created that are still empty. Standard output ("-"), devices, FIFOs and
// dangling links cannot be staged: their content is kept and written at commit(), before
// the regular files are renamed into place (so that a device that fails, /dev/full, leaves
// them as they were). SIGINT, SIGTERM, SIGHUP, SIGQUIT or SIGPIPE (standard output's
// reader gone while commit() writes it) between stage() and commit() removes the
// temporaries and the folders the batch made (still empty) before the signal ends the
// process, where the signal had its default action; SIGKILL leaves them.
class OutputBatch {
 public:
  // `inputs`: (option, path) of each file the command reads; an output at one of these
  // paths is refused, naming both options. Paths that name no file (empty, a preset's
  // name) are ignored.
  explicit OutputBatch(std::vector<std::pair<std::string, std::string>> inputs = {});
  OutputBatch(const OutputBatch&) = delete;
  OutputBatch& operator=(const OutputBatch&) = delete;
  ~OutputBatch();

  // An output file, before any work: check_can_write's checks, and an Error naming both
  // options when an input or another output has the same path. An empty path is ignored.
  void add(std::string_view option, const std::string& path);
  // A folder that outputs go into: created now when missing (removed again if the batch
  // is not committed and it is still empty); Error naming the option when it exists and
  // is not a folder, or cannot be created.
  void add_folder(std::string_view option, const std::string& dir);
  // Writes `content` for `path` (an output added, or a file inside a folder added, which
  // is then checked as add() would). Nothing is in place until commit(). A file staged
  // twice (under any spelling) is an Error: two outputs of one path.
  void stage(const std::string& path, std::string_view content);
  // Renames every staged file into place, then writes the kept contents (stdout, devices,
  // FIFOs). After it the destructor removes nothing.
  void commit();

 private:
  struct Staged {
    std::string path;       // where it goes
    std::string key;        // same_file_key(path): one file staged twice is refused
    std::string temporary;  // empty: `content` is written through at commit
    std::string content;
    bool placed = false;
  };
  struct Claim {
    std::string option, path, key;  // key: the path made absolute and canonical
    bool input;
  };
  std::vector<Claim> claimed_;
  std::vector<std::pair<std::string, std::string>> folders_;  // (option, key) of the folders added
  std::vector<std::string> created_;                           // of those, the ones this batch made
  std::vector<Staged> staged_;
  bool committed_ = false;

  void claim(std::string_view option, const std::string& path, bool input);
  [[nodiscard]] bool declared(const std::string& path) const;
};

}  // namespace tessel

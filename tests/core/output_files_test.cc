// OutputBatch: a command's output files land together or not at all; two outputs, or an
// output and an input, of one path are refused before any work.
#include "core/output_files.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "core/error.h"
#include "core/io.h"
#include "tests/support/error_of.h"
#include "tests/support/scratch.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

using testing::scratch_dir;
using testing::slurp;

std::vector<std::string> names_in(const fs::path& d) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(d)) out.push_back(fs::relative(e.path(), d).string());
  std::sort(out.begin(), out.end());
  return out;
}

// Runs `body` in a forked child (which exits 0 if body returns) and gives its wait
// status; -1, with a failure recorded, where fork or waitpid fails.
int status_of_child(const std::function<void()>& body) {
  const pid_t child = ::fork();
  if (child < 0) {
    ADD_FAILURE() << "fork failed";
    return -1;
  }
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child) {
    ADD_FAILURE() << "waitpid failed";
    return -1;
  }
  return status;
}

TEST(OutputBatch, NothingIsInPlaceBeforeCommitAndEverythingAfter) {
  fs::path d = scratch_dir("batch_commit");
  write_file_atomic((d / "a.json").string(), "old a");
  OutputBatch out;
  out.add("--first", (d / "a.json").string());
  out.add("--second", (d / "b.json").string());
  out.stage((d / "a.json").string(), "new a");
  out.stage((d / "b.json").string(), "new b");
  EXPECT_EQ(slurp(d / "a.json"), "old a");
  EXPECT_FALSE(fs::exists(d / "b.json"));
  out.commit();
  EXPECT_EQ(slurp(d / "a.json"), "new a");
  EXPECT_EQ(slurp(d / "b.json"), "new b");
  EXPECT_EQ(names_in(d), (std::vector<std::string>{"a.json", "b.json"}));
  fs::remove_all(d);
}

TEST(OutputBatch, AFailureBeforeCommitLeavesEveryFileAsItWas) {
  fs::path d = scratch_dir("batch_fail");
  write_file_atomic((d / "keep.json").string(), "kept");
  EXPECT_THROW(
      {
        OutputBatch out;
        out.add("--graph-out", (d / "keep.json").string());
        out.add("--task-graph", (d / "new.json").string());
        out.add_folder("--chakra", (d / "et" / "deeper").string());
        out.stage((d / "keep.json").string(), "replaced");
        out.stage((d / "et" / "deeper" / "tessel.0.et").string(), "trace");
        throw Error("the third output failed");
      },
      Error);
  EXPECT_EQ(slurp(d / "keep.json"), "kept");
  // No temporary, no new file, and the folders the batch made are gone again.
  EXPECT_EQ(names_in(d), (std::vector<std::string>{"keep.json"}));
  fs::remove_all(d);
}

TEST(OutputBatch, ASignalBetweenStageAndCommitLeavesEveryFileAsItWas) {
  // In a child process: staged, then ended by SIGTERM (or SIGINT) before commit. The
  // handler removes the temporaries and the folders the batch made, and the signal still
  // ends the process.
  for (int sig : {SIGTERM, SIGINT}) {
    fs::path d = scratch_dir("batch_signal");
    write_file_atomic((d / "keep.json").string(), "kept");
    const int status = status_of_child([&] {
      OutputBatch out;
      out.add("--graph-out", (d / "keep.json").string());
      out.add_folder("--chakra", (d / "et" / "deeper").string());
      out.stage((d / "keep.json").string(), "replaced");
      out.stage((d / "et" / "deeper" / "tessel.0.et").string(), "trace");
      ::raise(sig);  // ends the child
    });
    EXPECT_TRUE(WIFSIGNALED(status)) << status;
    if (WIFSIGNALED(status)) {
      EXPECT_EQ(WTERMSIG(status), sig);
    }
    EXPECT_EQ(slurp(d / "keep.json"), "kept");
    EXPECT_EQ(names_in(d), (std::vector<std::string>{"keep.json"}));
    fs::remove_all(d);
  }
}

TEST(SigintFlag, TheFirstCtrlCIsNotedAndTheSecondStillCleansUp) {
  // A child stages an output while a SigintFlag is alive (as sweep is): the first SIGINT
  // only sets the flag; the second (round 0), or one after the flag is gone (round 1),
  // removes the temporary and ends the process. sweep's own handler reset SIGINT to its
  // default on the second Ctrl-C, which skipped the cleanup.
  for (int round = 0; round < 2; ++round) {
    fs::path d = scratch_dir("sigint_flag");
    write_file_atomic((d / "keep.csv").string(), "kept");
    const int status = status_of_child([&] {
      auto ctrl_c = std::make_unique<SigintFlag>();  // before any output, as in sweep
      if (ctrl_c->interrupted()) ::_exit(10);
      OutputBatch out;
      out.add("-o", (d / "keep.csv").string());
      out.stage((d / "keep.csv").string(), "replaced");
      ::raise(SIGINT);
      if (!ctrl_c->interrupted()) ::_exit(11);
      if (round == 0) ::raise(SIGINT);  // ends the child
      ctrl_c.reset();
      ::raise(SIGINT);  // ends the child
    });
    EXPECT_TRUE(WIFSIGNALED(status)) << "round " << round << ": exit " << WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
      EXPECT_EQ(WTERMSIG(status), SIGINT);
    }
    EXPECT_EQ(slurp(d / "keep.csv"), "kept");
    EXPECT_EQ(names_in(d), (std::vector<std::string>{"keep.csv"}));
    fs::remove_all(d);
  }
}

TEST(SigintFlag, AnIgnoredSigintStaysIgnored) {
  const int status = status_of_child([] {
    ::signal(SIGINT, SIG_IGN);
    {
      const SigintFlag ctrl_c;
      ::raise(SIGINT);
      if (ctrl_c.interrupted()) ::_exit(11);
    }
    ::raise(SIGINT);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(OutputBatch, AFolderThatExistedOrHoldsOtherFilesStays) {
  fs::path d = scratch_dir("batch_folder");
  fs::create_directories(d / "traces");
  write_file_atomic((d / "traces" / "old.json").string(), "old");
  {
    OutputBatch out;
    out.add_folder("--trace-dir", (d / "traces").string());
    out.stage((d / "traces" / "row-simulated.json").string(), "{}");
  }
  EXPECT_EQ(names_in(d), (std::vector<std::string>{"traces", "traces/old.json"}));
  fs::remove_all(d);
}

TEST(OutputBatch, TwoOutputsOfOnePathAreRefusedNamingBothOptions) {
  fs::path d = scratch_dir("batch_same");
  OutputBatch out;
  out.add("--trace", (d / "x.json").string());
  std::string e = error_of([&] { out.add("--write-machine", (d / "." / "x.json").string()); });
  EXPECT_NE(e.find("--write-machine"), std::string::npos) << e;
  EXPECT_NE(e.find("the same file as --trace"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(OutputBatch, AnOutputAtAnInputsPathIsRefused) {
  fs::path d = scratch_dir("batch_input");
  write_file_atomic((d / "g.json").string(), "graph");
  OutputBatch out({{"-g", (d / "g.json").string()}, {"-m", ""}});
  std::string e = error_of([&] { out.add("-o", (d / "g.json").string()); });
  EXPECT_NE(e.find("the same file as the input -g"), std::string::npos) << e;
  // Through a symlink too.
  fs::create_symlink(d / "g.json", d / "link.json");
  e = error_of([&] { out.add("-o", (d / "link.json").string()); });
  EXPECT_NE(e.find("the same file as the input -g"), std::string::npos) << e;
  EXPECT_EQ(slurp(d / "g.json"), "graph");
  fs::remove_all(d);
}

TEST(OutputBatch, AFolderThatIsAFileIsAnErrorNamingTheOption) {
  fs::path d = scratch_dir("batch_notdir");
  write_file_atomic((d / "f").string(), "x");
  OutputBatch out;
  std::string e = error_of([&] { out.add_folder("--chakra", (d / "f").string()); });
  EXPECT_NE(e.find("--chakra"), std::string::npos) << e;
  EXPECT_NE(e.find("exists and is not a folder"), std::string::npos) << e;
  e = error_of([&] { out.add_folder("-o", (d / "f" / "sub").string()); });
  EXPECT_NE(e.find("cannot create the folder"), std::string::npos) << e;
  e = error_of([&] { out.add_folder("-o", ""); });
  EXPECT_NE(e.find("-o: the folder name is empty"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(OutputBatch, ASymlinkedOutputStaysALinkAndItsTargetIsReplaced) {
  fs::path d = scratch_dir("batch_link");
  write_file_atomic((d / "target.json").string(), "old");
  fs::create_symlink(d / "target.json", d / "link.json");
  OutputBatch out;
  out.add("-o", (d / "link.json").string());
  out.stage((d / "link.json").string(), "new");
  out.commit();
  EXPECT_TRUE(fs::is_symlink(d / "link.json"));
  EXPECT_EQ(slurp(d / "target.json"), "new");
  fs::remove_all(d);
}

TEST(OutputBatch, AFileOutsideEveryDeclaredPlaceIsAnInternalError) {
  fs::path d = scratch_dir("batch_undeclared");
  OutputBatch out;
  EXPECT_NE(error_of([&] { out.stage((d / "stray.json").string(), "x"); }).find("not declared"), std::string::npos);
  EXPECT_TRUE(names_in(d).empty());
  fs::remove_all(d);
}

TEST(OutputBatch, AFileOfAFolderThatIsAlsoAnOutputIsRefused) {
  fs::path d = scratch_dir("batch_folder_clash");
  OutputBatch out;
  out.add_folder("--chakra", (d / "et").string());
  out.add("--graph-out", (d / "et" / "tessel.0.et").string());
  out.stage((d / "et" / "tessel.0.et").string(), "graph");
  std::string e = error_of([&] { out.stage((d / "et" / "." / "tessel.0.et").string(), "trace"); });
  EXPECT_NE(e.find("two outputs of this command are this one file"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(OutputBatch, AWrittenThroughOutputThatFailsLeavesTheRegularFilesAsTheyWere) {
  fs::path d = scratch_dir("batch_through_fails");
  write_file_atomic((d / "t.json").string(), "old");
  {
    OutputBatch out;
    out.add("--trace", (d / "t.json").string());
    out.add("--write-machine", "/dev/full");
    out.stage((d / "t.json").string(), "new");
    out.stage("/dev/full", "machine");
    EXPECT_NE(error_of([&] { out.commit(); }).find("/dev/full: write failed"), std::string::npos);
  }
  EXPECT_EQ(slurp(d / "t.json"), "old");
  EXPECT_EQ(names_in(d), (std::vector<std::string>{"t.json"}));
  fs::remove_all(d);
}

TEST(OutputBatch, ALinkThatCannotBeWrittenThroughFailsWhenAdded) {
  fs::path d = scratch_dir("batch_bad_links");
  fs::create_symlink("loop.json", d / "loop.json");
  fs::create_symlink("nodir/m.json", d / "dangling.json");
  fs::create_symlink("m.json", d / "fine.json");  // dangling too, into a folder that exists
  OutputBatch out;
  EXPECT_NE(error_of([&] { out.add("-o", (d / "loop.json").string()); }).find("cannot open for writing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { out.add("-o", (d / "dangling.json").string()); }).find("which is no folder"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { out.add("-o", (d / "fine.json").string()); }), testing::kNoError);
  fs::remove_all(d);
}

TEST(ReadFile, ADirectoryIsNamedAsOne) {
  fs::path d = scratch_dir("read_dir");
  EXPECT_NE(error_of([&] { (void)read_file(d.string()); }).find("is a directory, not a file"), std::string::npos);
  fs::remove_all(d);
}

}  // namespace
}  // namespace tessel

#include "cli/supervisor.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "cli/supervisor_args.h"
#include "core/file_io.h"
#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

absl::StatusOr<SupervisorArgs> Parse(std::vector<std::string> words) {
  words.insert(words.begin(), "run");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return ParseSupervisorArgs(static_cast<int>(argv.size()), argv.data());
}

TEST(SupervisorArgsTest, StopsAtDashesAndOwnsResume) {
  absl::StatusOr<SupervisorArgs> a = Parse({"--np", "4", "--min-np", "2", "--max-restarts", "5", "--", "train",
                                            "--config", "c.pbtxt", "--resume", "--set", "x=1", "--set=y=2", "--np"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->np, 4);
  EXPECT_EQ(a->min_np, 2);
  EXPECT_EQ(a->max_restarts, 5);
  EXPECT_EQ(a->config_path, "c.pbtxt");
  EXPECT_EQ(a->overrides, (std::vector<std::string>{"x=1", "y=2"}));
  EXPECT_EQ(a->trainer,
            (std::vector<std::string>{"train", "--config", "c.pbtxt", "--set", "x=1", "--set=y=2", "--np"}));
}

TEST(SupervisorArgsTest, BadInputsNamed) {
  EXPECT_EQ(Parse({"--", "train", "--config", "c"}).status().message(), "--np is required");
  EXPECT_EQ(Parse({"--np", "2", "--min-np", "3", "--", "train", "--config", "c"}).status().message(),
            "--min-np 3 is above --np 2");
  EXPECT_EQ(Parse({"--np", "2", "--"}).status().message(), "no trainer program after '--'");
  EXPECT_EQ(Parse({"--np", "2"}).status().message(), "no trainer program after '--'");
  EXPECT_EQ(Parse({"--np", "0", "--", "t"}).status().message(), "--np: expected an integer >= 1, got '0'");
  EXPECT_EQ(Parse({"--np", "2", "--", "train"}).status().message(),
            "the trainer's arguments have no --config: cannot find engine.checkpoint.dir");
}

TEST(SupervisorTest, LayoutShrinksDpAndKeepsTheGlobalBatch) {
  absl::StatusOr<Layout> l = LayoutForRanks(4, 1, 1, 1, 4, 2);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->dp, 4);
  EXPECT_EQ(l->accumulation, 1);
  l = LayoutForRanks(4, 1, 1, 1, 3, 2);  // 3 does not divide 4: dp 2
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->dp, 2);
  EXPECT_EQ(l->accumulation, 2);
  EXPECT_EQ(l->world, 2);
  l = LayoutForRanks(4, 2, 1, 3, 5, 2);  // tp 2: dp 2 on 4 ranks
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->dp, 2);
  EXPECT_EQ(l->accumulation, 6);
  EXPECT_EQ(l->world, 4);
  EXPECT_EQ(LayoutForRanks(4, 1, 1, 1, 1, 2).status().message(),
            "1 ranks available hold no layout of at least --min-np 2 ranks (dp dividing 4, tp 1, pp 1)");
}

TEST(SupervisorTest, ScansOpenMpiFailuresAndProgress) {
  const std::string killed =
      "step     6/12 | loss 5.1\nstep     7/12 | loss 5.0\n"
      "mpirun noticed that process rank 1 with PID 4242 on node box exited on signal 9 (Killed).\n";
  AttemptReport r = ScanTrainerOutput(killed);
  EXPECT_EQ(r.cause, "rank 1 signal 9 (Killed)");
  EXPECT_EQ(r.last_step, 7);
  const std::string exited =
      "step     3/12 | loss 5.1\n  Process name: [[26109,1],0]\n  Exit code:    75\n";
  r = ScanTrainerOutput(exited);
  EXPECT_EQ(r.cause, "rank 0 exit code 75 (preempted)");
  EXPECT_EQ(r.last_step, 3);
  r = ScanTrainerOutput("nothing here\n");
  EXPECT_EQ(r.cause, "");
  EXPECT_EQ(r.last_step, -1);
  EXPECT_EQ(FailureCause(r, 75, 0), "exit code 75 (preempted)");
  EXPECT_EQ(FailureCause(r, -1, 9), "launcher signal 9");
}

// Open MPI 4.1's output when the watchdog of a rank whose peer was stopped
// (SIGSTOP) aborts the job: only mpirun's exit status (70) said so before.
TEST(SupervisorTest, NamesTheWatchdogAbortAndItsMessage) {
  const std::string out =
      "step    39/100 | loss 3.0\n"
      "[rank 0] zeroshard: collective #393 AllGather(f32, 6352) in group dp did not finish within 3s; rank 1 on vm "
      "did not answer (dead or stuck); aborting the job\n"
      "--------------------------------------------------------------------------\n"
      "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 70.\n\n"
      "[rank 1] zeroshard: collective #393 AllGather(f32, 6352) in group dp did not finish within 3s; rank 0 on vm "
      "did not answer (dead or stuck); aborting the job\n";
  const AttemptReport r = ScanTrainerOutput(out);
  EXPECT_EQ(r.cause,
            "rank 0 watchdog abort: collective #393 AllGather(f32, 6352) in group dp did not finish within 3s; rank 1 "
            "on vm did not answer (dead or stuck)");
  EXPECT_EQ(r.last_step, 39);
  // mpirun's banner first, then the aborting rank's line (forwarded later),
  // then the stopped rank's own, once mpirun woke it: rank 1's message.
  const std::string banner_first =
      "step    18/60 | loss 3.6\n"
      "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 70.\n\n"
      "[rank 1] zeroshard: collective #61 AllGather(f32, 4608) in group dp did not finish within 3s; rank 0 on vm "
      "did not answer (dead or stuck); aborting the job\n"
      "[rank 0] zeroshard: collective #28 AllGather(i32, 9) in group dp.control did not finish within 3s; rank 1 on "
      "vm did not answer (dead or stuck); aborting the job\n";
  EXPECT_EQ(ScanTrainerOutput(banner_first).cause,
            "rank 1 watchdog abort: collective #61 AllGather(f32, 4608) in group dp did not finish within 3s; rank 0 "
            "on vm did not answer (dead or stuck)");
  // Another program's MPI_Abort, without the watchdog's line.
  EXPECT_EQ(ScanTrainerOutput("MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 3.\n")
                .cause,
            "rank 2 MPI_Abort error code 3");
}

// A save on a full checkpoint disk: every rank exits 1 and the cause says
// what failed, not only "exit code 1".
TEST(SupervisorTest, NamesAFailedSave) {
  const std::string out =
      "step    30/60 | loss 3.1\n"
      "train_gpt2: writing a shard file failed on dp rank 0: cannot write '/ck/.tmp_step_30_0f31/"
      "shard_pp000_dp00000_tp000.safetensors': No space left on device; step 30 was not saved\n"
      "--------------------------------------------------------------------------\n"
      "Primary job  terminated normally, but 1 process returned\n"
      "a non-zero exit code. Per user-direction, the job has been aborted.\n"
      "  Process name: [[23463,1],0]\n  Exit code:    1\n";
  const AttemptReport r = ScanTrainerOutput(out);
  EXPECT_EQ(r.cause,
            "rank 0 exit code 1 (writing a shard file failed on dp rank 0: cannot write "
            "'/ck/.tmp_step_30_0f31/shard_pp000_dp00000_tp000.safetensors': No space left on device; step 30 was "
            "not saved)");
  EXPECT_EQ(r.last_step, 30);
}

// The earliest failure in the output is the cause, whichever kind it is.
TEST(SupervisorTest, EarliestFailureWins) {
  const std::string out =
      "  Process name: [[1,1],3]\n  Exit code:    2\n"
      "mpirun noticed that process rank 1 with PID 4242 on node box exited on signal 9 (Killed).\n";
  EXPECT_EQ(ScanTrainerOutput(out).cause, "rank 3 exit code 2");
}

TEST(SupervisorTest, RemovesAbandonedSavesOnly) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string root = std::string(base != nullptr ? base : "/tmp") + "/abandoned";
  ASSERT_TRUE(RemoveTree(root).ok() || !IsDirectory(root));
  ASSERT_TRUE(MakeDirectories(root + "/step_4").ok());
  ASSERT_TRUE(MakeDirectories(root + "/.tmp_step_8_ab12").ok());
  ASSERT_TRUE(MakeDirectories(root + "/.replaced_step_4").ok());
  std::ofstream(root + "/.tmp_step_8_ab12/shard_pp000_dp00000_tp000.safetensors") << "partial";
  std::ofstream(root + "/latest") << "step_4\n";
  absl::StatusOr<std::vector<std::string>> removed = RemoveAbandonedSaves(root);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, std::vector<std::string>{".tmp_step_8_ab12"});
  absl::StatusOr<std::vector<std::string>> left = ListDirectory(root);
  ASSERT_TRUE(left.ok());
  std::sort(left->begin(), left->end());
  EXPECT_EQ(*left, (std::vector<std::string>{".replaced_step_4", "latest", "step_4"}));
  removed = RemoveAbandonedSaves(root + "/missing");
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->empty());
}

TEST(SupervisorTest, LaunchCommand) {
  SupervisorArgs a;
  a.hostfile = "hosts";
  EXPECT_EQ(LaunchCommand(a, 4, 2, true, false, {"t", "x"}),
            (std::vector<std::string>{"mpirun", "-np", "4", "--hostfile", "hosts", "--allow-run-as-root",
                                      "--oversubscribe", "t", "x"}));
  a.hostfile.clear();
  EXPECT_EQ(LaunchCommand(a, 2, 2, false, false, {"t"}), (std::vector<std::string>{"mpirun", "-np", "2", "t"}));
  EXPECT_EQ(LaunchCommand(a, 2, 2, true, true, {"t"}), (std::vector<std::string>{"srun", "-n", "2", "t"}));
}

TEST(SupervisorArgsTest, HostfileSlots) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(base != nullptr ? base : "/tmp") + "/hosts";
  std::ofstream(path) << "# cluster\nnode1 slots=2\nnode2\n\nnode3 slots=4 max_slots=8  # big\n";
  absl::StatusOr<int> s = HostfileSlots(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, 7);
}

}  // namespace
}  // namespace zeroshard::cli

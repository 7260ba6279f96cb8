#include "checkpoint/checkpoint_root.h"

#include <cerrno>
#include <cstdlib>

#include "absl/strings/match.h"
#include "checkpoint/manifest.h"
#include "core/file_io.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::string FreshRoot(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = JoinPath(base != nullptr ? base : "/tmp", name);
  EXPECT_TRUE(RemoveTree(dir).ok());
  EXPECT_TRUE(MakeDirectories(dir).ok());
  return dir;
}

// A committed step whose manifest holds `tag`.
void Commit(const std::string& root, int64_t step, const std::string& tag) {
  const std::string tmp = JoinPath(root, TempStepDirName(step, "abc"));
  ASSERT_TRUE(MakeDirectories(tmp).ok());
  ASSERT_TRUE(WriteFileDurably(JoinPath(tmp, kManifestFileName), {tag}).ok());
  ASSERT_TRUE(CommitStepDirectory(root, tmp, step).ok());
}

TEST(CheckpointRootTest, CommitRenamesAndPointsLatest) {
  const std::string root = FreshRoot("root_commit");
  EXPECT_EQ(ResolveCheckpointDir(root).status().code(), absl::StatusCode::kNotFound);
  Commit(root, 10, "a");
  EXPECT_EQ(*ReadFileToString(JoinPath(root, "latest")), "step_10\n");
  EXPECT_EQ(*ResolveCheckpointDir(root), JoinPath(root, "step_10"));
  EXPECT_EQ(*ResolveCheckpointDir(JoinPath(root, "step_10")), JoinPath(root, "step_10"));
  Commit(root, 20, "b");
  Commit(root, 10, "c");  // re-saving a step replaces it and makes it latest
  EXPECT_EQ(*ReadFileToString(JoinPath(JoinPath(root, "step_10"), kManifestFileName)), "c");
  EXPECT_EQ(*ResolveCheckpointDir(root), JoinPath(root, "step_10"));
  EXPECT_EQ(*ListCheckpointSteps(root), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(*ListDirectory(root), (std::vector<std::string>{"latest", "step_10", "step_20"}));
}

TEST(CheckpointRootTest, MalformedOrDanglingLatest) {
  const std::string root = FreshRoot("root_latest");
  ASSERT_TRUE(WriteFileDurably(JoinPath(root, "latest"), {"step_x\n"}).ok());
  absl::StatusOr<std::string> d = ResolveCheckpointDir(root);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(d.status().message().find("holds 'step_x\\n', expected 'step_<N>'"), std::string::npos) << d.status();
  ASSERT_TRUE(WriteFileDurably(JoinPath(root, "latest"), {"step_3\n"}).ok());
  d = ResolveCheckpointDir(root);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(d.status().message().find("names step_3, which does not exist"), std::string::npos) << d.status();
}

TEST(CheckpointRootTest, PruneKeepsNewestAndLatestAndDropsTemporaries) {
  const std::string root = FreshRoot("root_prune");
  for (int64_t s : {5, 10, 15, 20}) Commit(root, s, "x");
  Commit(root, 10, "y");  // latest -> step_10, not the newest
  ASSERT_TRUE(MakeDirectories(JoinPath(root, ".tmp_step_25_dead")).ok());
  ASSERT_TRUE(MakeDirectories(JoinPath(root, ".tmp_step_30_mine")).ok());
  ASSERT_TRUE(PruneCheckpoints(root, 2, ".tmp_step_30_mine").ok());
  EXPECT_EQ(*ListDirectory(root),
            (std::vector<std::string>{".tmp_step_30_mine", "latest", "step_10", "step_15", "step_20"}));
  ASSERT_TRUE(PruneCheckpoints(root, 0).ok());  // keep all steps, drop temporaries
  EXPECT_EQ(*ListCheckpointSteps(root), (std::vector<int64_t>{10, 15, 20}));
  EXPECT_FALSE(PathExists(JoinPath(root, ".tmp_step_30_mine")));
}

// A commit that fails at any point before `latest` is replaced leaves the
// committed steps and `latest` as they were, and the new directory at its
// temporary name.
TEST(CheckpointRootTest, FailedCommitPutsEverythingBack) {
  struct Case {
    const char* name;
    FileOp op;
    const char* suffix;  // of the path that fails
    int64_t step;        // 10: re-saving the committed step, 20: a new one
  };
  for (const Case& c : {Case{"sync tmp", FileOp::kSync, "_abc", 20}, Case{"rename", FileOp::kRename, "step_20", 20},
                        Case{"exchange", FileOp::kRename, "step_10", 10},
                        Case{"latest.tmp full", FileOp::kWrite, "latest.tmp", 20},
                        Case{"latest.tmp full, re-save", FileOp::kWrite, "latest.tmp", 10},
                        Case{"rename latest", FileOp::kRename, "/latest", 20},
                        Case{"rename latest, re-save", FileOp::kRename, "/latest", 10}}) {
    SCOPED_TRACE(c.name);
    const std::string root = FreshRoot("root_failed_commit");
    Commit(root, 10, "old");
    const std::string tmp = JoinPath(root, TempStepDirName(c.step, "abc"));
    ASSERT_TRUE(MakeDirectories(tmp).ok());
    ASSERT_TRUE(WriteFileDurably(JoinPath(tmp, kManifestFileName), {"new"}).ok());
    SetFileFaultForTesting([&](FileOp op, const std::string& path) {
      return op == c.op && absl::EndsWith(path, c.suffix) ? ENOSPC : 0;
    });
    absl::Status s = CommitStepDirectory(root, tmp, c.step);
    SetFileFaultForTesting(nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_EQ(*ReadFileToString(JoinPath(root, "latest")), "step_10\n");
    EXPECT_EQ(*ReadFileToString(JoinPath(JoinPath(root, "step_10"), kManifestFileName)), "old");
    EXPECT_EQ(*ReadFileToString(JoinPath(tmp, kManifestFileName)), "new");
    EXPECT_EQ(*ListDirectory(root), (std::vector<std::string>{".tmp_step_" + std::to_string(c.step) + "_abc",
                                                              "latest", "step_10"}));
  }
}

}  // namespace
}  // namespace zeroshard

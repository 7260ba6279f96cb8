#include "checkpoint/retention.h"

#include <fstream>

#include "checkpoint/checkpoint_root.h"
#include "checkpoint/testing/checkpoint_fixture.h"
#include "core/file_io.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using ::zeroshard::testing::FixtureManifest;
using ::zeroshard::testing::FreshTempDir;
using ::zeroshard::testing::RandomFlatValues;
using ::zeroshard::testing::WriteFixture;

void Save(const std::string& root, int64_t step) {
  const CheckpointManifest m = FixtureManifest(2, step);
  ASSERT_TRUE(WriteFixture(root, m, RandomFlatValues(m, static_cast<uint32_t>(step))).ok());
}

// Flips one byte in the middle of step's first shard file.
void Corrupt(const std::string& root, int64_t step) {
  const std::string path = JoinPath(JoinPath(root, StepDirName(step)), "shard_pp000_dp00000_tp000.safetensors");
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  f.seekg(0, std::ios::end);
  const std::streamoff at = f.tellg() - std::streamoff{8};
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(RetentionTest, ResumeUsesLatestWhenItVerifies) {
  const std::string root = FreshTempDir("ret_latest");
  Save(root, 2);
  Save(root, 4);
  absl::StatusOr<ResumePoint> p = FindResumeCheckpoint(root);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->step, 4);
  EXPECT_EQ(p->dir, JoinPath(root, "step_4"));
  EXPECT_TRUE(p->rejected.empty());
  EXPECT_EQ(p->FallbackWarning(), "");
}

TEST(RetentionTest, CorruptLatestFallsBackToNewestVerifiedAndNamesBoth) {
  const std::string root = FreshTempDir("ret_fallback");
  Save(root, 2);
  Save(root, 4);
  Save(root, 6);
  Corrupt(root, 6);
  absl::StatusOr<ResumePoint> p = FindResumeCheckpoint(root);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->step, 4);
  ASSERT_EQ(p->rejected.size(), 1u);
  EXPECT_EQ(p->rejected[0].dir, JoinPath(root, "step_6"));
  EXPECT_EQ(p->rejected[0].problem.code(), absl::StatusCode::kDataLoss);
  const std::string w = p->FallbackWarning();
  EXPECT_EQ(w.rfind("checkpoint " + JoinPath(root, "step_6") + " fails verification: ", 0), 0u) << w;
  EXPECT_NE(w.find("shard_pp000_dp00000_tp000.safetensors"), std::string::npos) << w;
  EXPECT_NE(w.find("; resuming from " + JoinPath(root, "step_4") + " (step 4), the newest that verifies"),
            std::string::npos)
      << w;
}

TEST(RetentionTest, StepsNewerThanLatestAreNotCandidates) {
  const std::string root = FreshTempDir("ret_newer");
  Save(root, 2);
  Save(root, 4);
  ASSERT_TRUE(WriteFileDurably(JoinPath(root, "latest"), {"step_2\n"}).ok());
  absl::StatusOr<ResumePoint> p = FindResumeCheckpoint(root);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->step, 2);
}

TEST(RetentionTest, NoVerifiedCheckpointIsANamedError) {
  const std::string root = FreshTempDir("ret_none");
  absl::StatusOr<ResumePoint> p = FindResumeCheckpoint(root);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(), "no checkpoint under '" + root + "': it holds no committed step_<N>");
  Save(root, 2);
  Save(root, 4);
  Corrupt(root, 2);
  Corrupt(root, 4);
  p = FindResumeCheckpoint(root);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
  const std::string m(p.status().message());
  EXPECT_EQ(m.rfind("no checkpoint under '" + root + "' verifies: " + JoinPath(root, "step_4") +
                        " fails verification: ",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("; " + JoinPath(root, "step_2") + " fails verification: "), std::string::npos) << m;
}

TEST(RetentionTest, PruneKeepsNewestVerifiedBeyondKeepLast) {
  const std::string root = FreshTempDir("ret_prune");
  for (int64_t s : {2, 4, 6, 8}) Save(root, s);
  Corrupt(root, 6);
  Corrupt(root, 8);
  ASSERT_TRUE(PruneCheckpointsKeepingVerified(root, 2).ok());
  // keep_last 2 keeps 6 and 8 (both corrupt) and also 4, the newest that verifies.
  EXPECT_EQ(*ListCheckpointSteps(root), (std::vector<int64_t>{4, 6, 8}));
  absl::StatusOr<ResumePoint> p = FindResumeCheckpoint(root);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->step, 4);
  EXPECT_EQ(p->rejected.size(), 2u);
}

TEST(RetentionTest, PruneWithVerifiedNewestKeepsOnlyKeepLast) {
  const std::string root = FreshTempDir("ret_prune_ok");
  for (int64_t s : {2, 4, 6, 8}) Save(root, s);
  Corrupt(root, 2);
  ASSERT_TRUE(PruneCheckpointsKeepingVerified(root, 2).ok());
  EXPECT_EQ(*ListCheckpointSteps(root), (std::vector<int64_t>{6, 8}));
}

// The step a save just wrote is trusted without a read-back; an older one
// is read.
TEST(RetentionTest, PruneTrustsTheStepJustWritten) {
  const std::string root = FreshTempDir("ret_prune_written");
  for (int64_t s : {2, 4, 6}) Save(root, s);
  Corrupt(root, 6);
  ASSERT_TRUE(PruneCheckpointsKeepingVerified(root, 1, "", 6).ok());
  EXPECT_EQ(*ListCheckpointSteps(root), (std::vector<int64_t>{6}));
  const std::string other = FreshTempDir("ret_prune_read");
  for (int64_t s : {2, 4, 6}) Save(other, s);
  Corrupt(other, 6);
  ASSERT_TRUE(PruneCheckpointsKeepingVerified(other, 1, "", 5).ok());
  EXPECT_EQ(*ListCheckpointSteps(other), (std::vector<int64_t>{4, 6}));
}

}  // namespace
}  // namespace zeroshard

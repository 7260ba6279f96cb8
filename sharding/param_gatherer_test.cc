#include "sharding/param_gatherer.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

// Four units like GPT-2's: embed (0), two blocks, head (3) needing embed.
class ParamGathererTest : public ::testing::Test {
 protected:
  void Build(const GatherOptions& options) {
    comms_ = CreateThreadGroup(1);
    const int64_t sizes[] = {400, 100, 100, 10};
    for (int u = 0; u < 4; ++u) {
      layouts_.push_back(*FlatParamLayout::Create("u" + std::to_string(u), u, {{"w" + std::to_string(u), {sizes[u]}}}, 1));
    }
    std::vector<UnitShard*> raw;
    for (auto& l : layouts_) {
      shards_.push_back(*UnitShard::Create(&l, 3, comms_[0].get(), &tracker_));
      raw.push_back(shards_.back().get());
    }
    auto g = ParamGatherer::Create(raw, {{0}, {1}, {2}, {3, 0}}, options);
    ASSERT_TRUE(g.ok()) << g.status();
    gatherer_ = std::move(*g);
  }

  // One forward and one backward pass; returns gathers per unit.
  std::vector<int64_t> RunPasses() {
    for (int u = 0; u < 4; ++u) {
      EXPECT_TRUE(gatherer_->AcquireForward(u).ok());
      for (int o : gatherer_->needs(u)) EXPECT_TRUE(shards_[o]->gathered()) << "unit " << o << " for " << u;
      EXPECT_TRUE(gatherer_->AfterForward(u).ok());
    }
    for (int u = 3; u >= 0; --u) {
      EXPECT_TRUE(gatherer_->AcquireBackward(u).ok());
      for (int o : gatherer_->needs(u)) EXPECT_TRUE(shards_[o]->gathered());
      EXPECT_TRUE(gatherer_->AfterBackward(u).ok());
    }
    EXPECT_TRUE(gatherer_->ReleaseAll().ok());
    std::vector<int64_t> gathers;
    for (auto& s : shards_) gathers.push_back(s->gathers());
    return gathers;
  }

  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<FlatParamLayout> layouts_;
  MemoryTracker tracker_;
  std::vector<std::unique_ptr<UnitShard>> shards_;
  std::unique_ptr<ParamGatherer> gatherer_;
};

TEST_F(ParamGathererTest, EveryUnitOncePerPassTiedOwnerHeld) {
  Build({/*prefetch=*/1, /*persistence_threshold=*/0, /*reshard_after_forward=*/true});
  EXPECT_EQ(RunPasses(), std::vector<int64_t>({2, 2, 2, 2}));
  // The unit, one prefetched, and embed held for the head.
  EXPECT_EQ(gatherer_->peak_live_units(), 3);
  EXPECT_EQ(tracker_.Usage(MemoryCategory::kParams).current, 4 * (400 + 112 + 112 + 16));  // shards only
}

TEST_F(ParamGathererTest, NoPrefetchKeepsOnlyWhatIsNeeded) {
  Build({0, 0, true});
  EXPECT_EQ(RunPasses(), std::vector<int64_t>({2, 2, 2, 2}));
  EXPECT_EQ(gatherer_->peak_live_units(), 2);
}

TEST_F(ParamGathererTest, PersistentUnitsGatherOncePerStep) {
  Build({1, /*persistence_threshold=*/101, true});  // the blocks and the head
  EXPECT_TRUE(gatherer_->persistent(1));
  EXPECT_FALSE(gatherer_->persistent(0));
  EXPECT_EQ(RunPasses(), std::vector<int64_t>({2, 1, 1, 1}));
}

TEST_F(ParamGathererTest, WithoutReshardEachUnitGathersOnce) {
  Build({1, 0, /*reshard_after_forward=*/false});
  EXPECT_EQ(RunPasses(), std::vector<int64_t>({1, 1, 1, 1}));
  EXPECT_EQ(gatherer_->peak_live_units(), 4);
}

TEST(ParamGathererCreateTest, RejectsBadArguments) {
  EXPECT_EQ(ParamGatherer::Create({}, {}, {-1, 0, true}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParamGatherer::Create({}, {{0}}, {1, 0, true}).status().message(), "needs lists 1 units, expected 0");
}

}  // namespace
}  // namespace zeroshard

#include "sharding/grad_reducer.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

// Units of 100, 10, 10 and 200 elements at dp = 2, alignment 16:
// P = 128, 32, 32, 224 (512, 128, 128, 896 bytes).
std::vector<FlatParamLayout> Layouts(int dp) {
  std::vector<FlatParamLayout> out;
  const int64_t sizes[] = {100, 10, 10, 200};
  for (int u = 0; u < 4; ++u) out.push_back(*FlatParamLayout::Create("u" + std::to_string(u), u, {{"w", {sizes[u]}}}, dp));
  return out;
}

TEST(GradReducerTest, BucketsFormFromTheLastUnit) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(1);
  std::vector<FlatParamLayout> layouts = Layouts(1);
  MemoryTracker tracker;
  std::vector<std::unique_ptr<UnitShard>> shards;
  std::vector<UnitShard*> raw;
  for (auto& l : layouts) {
    shards.push_back(*UnitShard::Create(&l, 2, comms[0].get(), &tracker));
    raw.push_back(shards.back().get());
  }
  // dp = 1: P = 112, 16, 16, 208 -> 448, 64, 64, 832 bytes; 150-byte buckets.
  auto reducer = GradReducer::Create(raw, 150, comms[0].get(), &tracker);
  ASSERT_TRUE(reducer.ok());
  ASSERT_EQ((*reducer)->num_buckets(), 3);
  EXPECT_EQ((*reducer)->bucket_units(0), std::vector<int>({3}));
  EXPECT_EQ((*reducer)->bucket_units(1), std::vector<int>({1, 2}));
  EXPECT_EQ((*reducer)->bucket_units(2), std::vector<int>({0}));
  EXPECT_TRUE((*reducer)->closes_bucket(1));
  EXPECT_FALSE((*reducer)->closes_bucket(2));
  EXPECT_TRUE((*reducer)->closes_bucket(0));
  EXPECT_EQ(GradReducer::Create(raw, -1, comms[0].get(), &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Two ranks, integer-valued gradients (exact sums): every fused or single
// bucket delivers the average of the ranks' slices into each shard, and a
// second reduction accumulates.
TEST(GradReducerTest, ReducesAveragesIntoShardsExactly) {
  for (int64_t bucket_bytes : {int64_t{0}, int64_t{300}, int64_t{1} << 20}) {
    std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(2);
    std::vector<FlatParamLayout> layouts = Layouts(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        MemoryTracker tracker;
        std::vector<std::unique_ptr<UnitShard>> shards;
        std::vector<UnitShard*> raw;
        for (auto& l : layouts) {
          shards.push_back(*UnitShard::Create(&l, 2, comms[r].get(), &tracker));
          raw.push_back(shards.back().get());
        }
        auto reducer = GradReducer::Create(raw, bucket_bytes, comms[r].get(), &tracker);
        ASSERT_TRUE(reducer.ok());
        for (int round = 1; round <= 2; ++round) {
          for (int u = 3; u >= 0; --u) {
            ASSERT_TRUE(shards[u]->EnsureFullGrads().ok());
            float* g = static_cast<float*>(shards[u]->full_grads());
            for (int64_t i = 0; i < layouts[u].padded_numel(); ++i) g[i] = static_cast<float>(r * 1000 + u * 100 + i);
            if ((*reducer)->closes_bucket(u)) {
              ASSERT_TRUE((*reducer)->Launch((*reducer)->bucket_of(u)).ok());
            }
          }
          ASSERT_TRUE((*reducer)->FinishAll().ok());
          for (int u = 0; u < 4; ++u) {
            EXPECT_EQ(shards[u]->full_grads(), nullptr) << "stage 2 keeps full grads only until reduced";
            const int64_t S = layouts[u].shard_numel();
            for (int64_t i = 0; i < S; ++i) {
              const int64_t flat = r * S + i;
              const float avg = (static_cast<float>(u * 100 + flat) + static_cast<float>(1000 + u * 100 + flat)) / 2;
              ASSERT_EQ(shards[u]->grad_shard()[i], round * avg) << "bucket_bytes " << bucket_bytes << " unit " << u;
            }
          }
        }
        EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, 0);
      });
    }
    for (auto& t : threads) t.join();
  }
}

}  // namespace
}  // namespace zeroshard

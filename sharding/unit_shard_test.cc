#include "sharding/unit_shard.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

// N = 45 over dp = 2: S = 32, P = 64.
FlatParamLayout Layout() { return *FlatParamLayout::Create("h.0", 1, {{"w", {5, 7}}, {"b", {10}}}, 2); }

// Runs fn(rank, comm) on two threads.
template <typename Fn>
void OnTwoRanks(Fn fn) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(2);
  std::thread t0([&] { fn(0, comms[0].get()); });
  std::thread t1([&] { fn(1, comms[1].get()); });
  t0.join();
  t1.join();
}

TEST(UnitShardTest, AtRestBuffersPerStage) {
  const FlatParamLayout layout = Layout();
  const int64_t P = 64, S = 32;
  ASSERT_EQ(layout.padded_numel(), P);
  OnTwoRanks([&](int rank, Communicator* comm) {
    for (int stage = 0; stage <= 3; ++stage) {
      MemoryTracker tracker;
      auto shard = UnitShard::Create(&layout, *ZeroPolicy::ForStage(stage), comm, &tracker);
      ASSERT_TRUE(shard.ok()) << shard.status();
      EXPECT_EQ(tracker.Usage(MemoryCategory::kParams).current, 4 * (stage == 3 ? S : P)) << stage;
      EXPECT_EQ(tracker.Usage(MemoryCategory::kGrads).current, 4 * (stage <= 1 ? P : S)) << stage;
      EXPECT_EQ(tracker.Usage(MemoryCategory::kMasterParams).current, 4 * (stage == 0 ? P : S)) << stage;
      EXPECT_EQ((*shard)->master_begin(), stage == 0 ? 0 : rank * S);
      EXPECT_EQ((*shard)->full_params() == nullptr, stage == 3);
    }
  });
}

TEST(UnitShardTest, Stage3GathersAndReleases) {
  const FlatParamLayout layout = Layout();
  OnTwoRanks([&](int rank, Communicator* comm) {
    MemoryTracker tracker;
    auto shard = *UnitShard::Create(&layout, *ZeroPolicy::ForStage(3), comm, &tracker);
    for (int i = 0; i < 32; ++i) static_cast<float*>(shard->param_shard())[i] = static_cast<float>(rank * 32 + i);
    ASSERT_TRUE(shard->StartGather().ok());
    EXPECT_TRUE(shard->StartGather().ok());  // no second collective
    ASSERT_TRUE(shard->WaitGather().ok());
    ASSERT_TRUE(shard->gathered());
    EXPECT_EQ(shard->gathers(), 1);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(static_cast<float*>(shard->full_params())[i], static_cast<float>(i));
    EXPECT_EQ(tracker.Usage(MemoryCategory::kParams).current, 4 * (32 + 64));
    ASSERT_TRUE(shard->Release().ok());
    EXPECT_EQ(shard->full_params(), nullptr);
    EXPECT_EQ(tracker.Usage(MemoryCategory::kParams).current, 4 * 32);
  });
}

// Parameters off the device (the NVMe tier): no shard is allocated; the
// gather reads the bound buffer and the rounding writes it.
TEST(UnitShardTest, Stage3NonResidentShardGathersAndRoundsThroughTheBoundBuffer) {
  const FlatParamLayout layout = Layout();
  OnTwoRanks([&](int rank, Communicator* comm) {
    MemoryTracker tracker;
    auto shard = *UnitShard::Create(&layout, *ZeroPolicy::ForStage(3), comm, &tracker, DType::kF32,
                                    kernels::KernelContext::Cpu(1), /*trainable=*/true, /*resident_master=*/true,
                                    /*resident_params=*/false);
    EXPECT_FALSE(shard->resident_params());
    EXPECT_EQ(tracker.Usage(MemoryCategory::kParams).current, 0);
    EXPECT_EQ(shard->param_shard(), nullptr);
    std::vector<float> slot(32);
    for (int i = 0; i < 32; ++i) slot[i] = static_cast<float>(rank * 32 + i);
    shard->BindParamShard(slot.data());
    EXPECT_EQ(shard->param_shard(), slot.data());
    ASSERT_TRUE(shard->WaitGather().ok());
    for (int i = 0; i < 64; ++i) EXPECT_EQ(static_cast<float*>(shard->full_params())[i], static_cast<float>(i));
    EXPECT_EQ(tracker.Usage(MemoryCategory::kParams).current, 4 * 64);  // the gathered copy only
    ASSERT_TRUE(shard->Release().ok());
    for (int i = 0; i < 32; ++i) shard->master()[i] = 0.5f + static_cast<float>(i);
    auto published = shard->PublishMaster();
    ASSERT_TRUE(published.ok()) << published.status();
    EXPECT_EQ(*published, nullptr);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(slot[i], 0.5f + static_cast<float>(i));
  });
  // Below stage 3 the full parameters are always resident.
  std::vector<std::unique_ptr<Communicator>> one = CreateThreadGroup(2);
  const FlatParamLayout two = Layout();
  auto refused = UnitShard::Create(&two, *ZeroPolicy::ForStage(2), one[0].get(), nullptr, DType::kF32,
                                   kernels::KernelContext::Cpu(1), true, true, /*resident_params=*/false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "unit 'h.0': parameters off the device need ZeRO stage 3 shards");
}

// Gradients off the device (stages 2-3): no shard at rest, grad_shard() is
// the bound buffer (what the reducer accumulates into), null unbound;
// refused below stage 2 and for a frozen unit.
TEST(UnitShardTest, NonResidentGradShardIsTheBoundBuffer) {
  const FlatParamLayout layout = Layout();
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(2);
  for (int stage : {2, 3}) {
    MemoryTracker tracker;
    auto shard = UnitShard::Create(&layout, *ZeroPolicy::ForStage(stage), comms[0].get(), &tracker, DType::kF32,
                                   kernels::KernelContext::Cpu(1), /*trainable=*/true, /*resident_master=*/true,
                                   /*resident_params=*/true, /*resident_grads=*/false);
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_FALSE((*shard)->resident_grads());
    EXPECT_EQ(tracker.Usage(MemoryCategory::kGrads).current, 0) << stage;
    EXPECT_EQ((*shard)->grad_shard(), nullptr);
    std::vector<float> staging(32, 2.5f);
    (*shard)->BindGradShard(staging.data());
    EXPECT_EQ((*shard)->grad_shard(), staging.data());
    ASSERT_TRUE((*shard)->ZeroGradShard().ok());  // no resident shard to zero: the staging is the caller's
    EXPECT_EQ(staging[0], 2.5f);
    (*shard)->BindGradShard(nullptr);
    EXPECT_EQ((*shard)->grad_shard(), nullptr);
  }
  for (const auto& [stage, trainable] : {std::pair<int, bool>{1, true}, {2, false}}) {
    auto refused = UnitShard::Create(&layout, *ZeroPolicy::ForStage(stage), comms[0].get(), nullptr, DType::kF32,
                                     kernels::KernelContext::Cpu(1), trainable, true, true, /*resident_grads=*/false);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message(),
              "unit 'h.0': gradients off the device need a trainable unit at ZeRO stage 2 or 3 (an f32 gradient "
              "shard)");
  }
}

TEST(UnitShardTest, Stage3GatherIsDrawnOnTheTimeline) {
  const FlatParamLayout layout = Layout();
  OnTwoRanks([&](int rank, Communicator* comm) {
    MemoryTracker tracker;
    Timeline timeline;
    auto shard = *UnitShard::Create(&layout, *ZeroPolicy::ForStage(3), comm, &tracker);
    shard->set_timeline(&timeline);
    ASSERT_TRUE(shard->WaitGather().ok());
    ASSERT_TRUE(shard->Release().ok());
    ASSERT_EQ(timeline.events().size(), 1u) << "the thread communicator completes at issue: no wait drawn";
    const TraceEvent& e = timeline.events()[0];
    EXPECT_EQ(e.name, "AllGather h.0");
    EXPECT_EQ(e.track, TraceTrack::kComm);
    EXPECT_STREQ(e.category, "gather");
    ASSERT_EQ(e.args.size(), 2u);
    EXPECT_EQ(e.args[0].value, 4 * 64);  // the gathered buffer's bytes
  });
}

TEST(UnitShardTest, AUnitWithoutParametersGathersNothing) {
  const FlatParamLayout empty = *FlatParamLayout::Create("act", 0, {}, 2);
  ASSERT_EQ(empty.padded_numel(), 0);
  OnTwoRanks([&](int rank, Communicator* comm) {
    MemoryTracker tracker;
    auto shard = *UnitShard::Create(&empty, *ZeroPolicy::ForStage(3), comm, &tracker);
    ASSERT_TRUE(shard->WaitGather().ok());  // without StartGather first
    EXPECT_TRUE(shard->gathered());
    EXPECT_EQ(shard->gathers(), 0);
    EXPECT_EQ(comm->Stats().Total().calls, 0);
    EXPECT_TRUE(shard->Release().ok());
  });
}

TEST(UnitShardTest, PublishMasterRefreshesEveryRanksParams) {
  const FlatParamLayout layout = Layout();
  OnTwoRanks([&](int rank, Communicator* comm) {
    for (int stage : {1, 2}) {
      MemoryTracker tracker;
      auto shard = *UnitShard::Create(&layout, *ZeroPolicy::ForStage(stage), comm, &tracker);
      for (int i = 0; i < 64; ++i) static_cast<float*>(shard->full_params())[i] = NAN;  // poison
      for (int i = 0; i < 32; ++i) shard->master()[i] = static_cast<float>(100 * (rank + 1) + i);
      auto work = shard->PublishMaster();
      ASSERT_TRUE(work.ok());
      ASSERT_NE(*work, nullptr);
      ASSERT_TRUE((*work)->Wait().ok());
      for (int r = 0; r < 2; ++r) {
        for (int i = 0; i < 32; ++i) EXPECT_EQ(static_cast<float*>(shard->full_params())[r * 32 + i], static_cast<float>(100 * (r + 1) + i));
      }
    }
  });
}

TEST(UnitShardTest, RejectsDpMismatch) {
  const FlatParamLayout layout = Layout();
  std::vector<std::unique_ptr<Communicator>> one = CreateThreadGroup(1);
  MemoryTracker tracker;
  absl::Status s = UnitShard::Create(&layout, *ZeroPolicy::ForStage(2), one[0].get(), &tracker).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unit 'h.0' is laid out for dp 2 but the dp communicator has 1 ranks");
}

// bf16 compute: 2-byte params and full grads; PublishMaster rounds the f32
// master to nearest-even bf16 once, and stages 1-3 move bf16 shards.
TEST(UnitShardTest, Bf16PublishRoundsTheMasterAndGathersBf16) {
  const FlatParamLayout layout = Layout();
  const int64_t P = 64, S = 32;
  OnTwoRanks([&](int rank, Communicator* comm) {
    for (int stage = 0; stage <= 3; ++stage) {
      MemoryTracker tracker;
      auto shard = UnitShard::Create(&layout, *ZeroPolicy::ForStage(stage), comm, &tracker, DType::kBF16);
      ASSERT_TRUE(shard.ok()) << shard.status();
      EXPECT_EQ(tracker.Usage(MemoryCategory::kParams).current, 2 * (stage == 3 ? S : P)) << stage;
      EXPECT_EQ(tracker.Usage(MemoryCategory::kGrads).current, stage <= 1 ? 2 * P : 4 * S) << stage;
      EXPECT_EQ(tracker.Usage(MemoryCategory::kMasterParams).current, 4 * (stage == 0 ? P : S)) << stage;
      // Master values that need rounding: 1 + i/1000 (not representable in bf16).
      auto master_value = [](int64_t flat) { return 1.0f + static_cast<float>(flat) / 1000.0f + 1e-4f; };
      for (int64_t i = 0; i < (*shard)->master_numel(); ++i) {
        (*shard)->master()[i] = master_value((*shard)->master_begin() + i);
      }
      auto work = (*shard)->PublishMaster();
      ASSERT_TRUE(work.ok()) << work.status();
      if (*work != nullptr) {
        ASSERT_TRUE((*work)->Wait().ok());
      }
      if (stage == 3) {
        ASSERT_TRUE((*shard)->WaitGather().ok());
        EXPECT_EQ((*shard)->gathers(), 1);
      }
      const uint16_t* full = static_cast<const uint16_t*>((*shard)->full_params());
      ASSERT_NE(full, nullptr);
      for (int64_t i = 0; i < P; ++i) {
        ASSERT_EQ(full[i], F32ToBF16(master_value(i))) << "stage " << stage << " element " << i;
      }
      ASSERT_TRUE((*shard)->Release().ok());
    }
  });
}

TEST(UnitShardTest, RejectsIntegerComputeDtype) {
  const FlatParamLayout layout = Layout();
  OnTwoRanks([&](int, Communicator* comm) {
    MemoryTracker tracker;
    absl::Status s = UnitShard::Create(&layout, *ZeroPolicy::ForStage(2), comm, &tracker, DType::kI32).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "compute dtype is i32, expected f32, bf16 or f16");
  });
}

// Streaming: without a resident master, RoundMasterRange over chunks then
// PublishRounded leaves every rank with the parameters PublishMaster gives.
TEST(UnitShardTest, RoundMasterRangeThenPublishRoundedEqualsPublishMaster) {
  const FlatParamLayout layout = Layout();
  OnTwoRanks([&](int rank, Communicator* comm) {
    for (int stage = 0; stage <= 3; ++stage) {
      MemoryTracker tracker;
      const ZeroPolicy zero = *ZeroPolicy::ForStage(stage);
      auto ref = *UnitShard::Create(&layout, zero, comm, &tracker, DType::kBF16);
      auto streamed = *UnitShard::Create(&layout, zero, comm, &tracker, DType::kBF16, kernels::KernelContext::Cpu(1),
                                         true, /*resident_master=*/false);
      ASSERT_EQ(streamed->master(), nullptr);
      ASSERT_EQ(streamed->master_numel(), ref->master_numel());
      EXPECT_EQ(streamed->PublishMaster().status().code(), absl::StatusCode::kFailedPrecondition);
      const int64_t n = ref->master_numel();
      std::vector<float> master(n);
      for (int64_t i = 0; i < n; ++i) master[i] = 0.001f * static_cast<float>((i + 1) * (rank + 3)) + 1.0f / 3.0f;
      std::copy(master.begin(), master.end(), ref->master());
      auto w = ref->PublishMaster();
      ASSERT_TRUE(w.ok()) << w.status();
      if (*w != nullptr) ASSERT_TRUE((*w)->Wait().ok());
      for (int64_t off = 0; off < n; off += 5) {
        ASSERT_TRUE(streamed->RoundMasterRange(off, std::min<int64_t>(5, n - off), master.data() + off).ok());
      }
      EXPECT_EQ(streamed->RoundMasterRange(n - 1, 2, master.data()).code(), absl::StatusCode::kOutOfRange);
      auto w2 = streamed->PublishRounded();
      ASSERT_TRUE(w2.ok()) << w2.status();
      EXPECT_EQ(*w2 != nullptr, stage == 1 || stage == 2) << stage;
      if (*w2 != nullptr) ASSERT_TRUE((*w2)->Wait().ok());
      const int64_t bytes = (stage == 3 ? layout.shard_numel() : layout.padded_numel()) * 2;
      const void* a = stage == 3 ? ref->param_shard() : ref->full_params();
      const void* b = stage == 3 ? streamed->param_shard() : streamed->full_params();
      EXPECT_EQ(0, std::memcmp(a, b, bytes)) << "stage " << stage;
    }
  });
}

}  // namespace
}  // namespace zeroshard

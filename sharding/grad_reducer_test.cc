#include "sharding/grad_reducer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "comm/comm_stats.h"
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

// Whether u is the lowest unit of its bucket (with no borrowing, where the
// step program launches the bucket).
bool ClosesBucket(const GradReducer& r, int u) { return r.bucket_units(r.bucket_of(u)).front() == u; }

TEST(GradReducerTest, BucketsFormFromTheLastUnit) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(1);
  std::vector<FlatParamLayout> layouts = Layouts(1);
  MemoryTracker tracker;
  std::vector<std::unique_ptr<UnitShard>> shards;
  std::vector<UnitShard*> raw;
  for (auto& l : layouts) {
    shards.push_back(*UnitShard::Create(&l, *ZeroPolicy::ForStage(2), comms[0].get(), &tracker));
    raw.push_back(shards.back().get());
  }
  // dp = 1: P = 112, 16, 16, 208 -> 448, 64, 64, 832 bytes; 150-byte buckets.
  auto reducer = GradReducer::Create(raw, 150, comms[0].get(), &tracker);
  ASSERT_TRUE(reducer.ok());
  ASSERT_EQ((*reducer)->num_buckets(), 3);
  EXPECT_EQ((*reducer)->bucket_units(0), std::vector<int>({3}));
  EXPECT_EQ((*reducer)->bucket_units(1), std::vector<int>({1, 2}));
  EXPECT_EQ((*reducer)->bucket_units(2), std::vector<int>({0}));
  EXPECT_EQ((*reducer)->bucket_label(1), "u1..u2");
  EXPECT_EQ((*reducer)->reduce_bytes(1), (16 + 16) * 4);
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
          shards.push_back(*UnitShard::Create(&l, *ZeroPolicy::ForStage(2), comms[r].get(), &tracker));
          raw.push_back(shards.back().get());
        }
        auto reducer = GradReducer::Create(raw, bucket_bytes, comms[r].get(), &tracker);
        ASSERT_TRUE(reducer.ok());
        for (int round = 1; round <= 2; ++round) {
          for (int u = 3; u >= 0; --u) {
            ASSERT_TRUE(shards[u]->EnsureFullGrads().ok());
            float* g = static_cast<float*>(shards[u]->full_grads());
            for (int64_t i = 0; i < layouts[u].padded_numel(); ++i) g[i] = static_cast<float>(r * 1000 + u * 100 + i);
            if (ClosesBucket(**reducer, u)) {
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

// bf16 compute, f32 reduction: every bucket (fused or not) casts the bf16
// full gradients into f32 staging; small integers are exact in bf16, so the
// averages are exact. A bf16 reduce dtype is refused by nothing here but
// needs a backend that reduces bf16 (MPI; see tests/engine).
TEST(GradReducerTest, Bf16GradientsReduceInF32) {
  for (int64_t bucket_bytes : {int64_t{0}, int64_t{1} << 20}) {
    std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(2);
    std::vector<FlatParamLayout> layouts = Layouts(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        MemoryTracker tracker;
        std::vector<std::unique_ptr<UnitShard>> shards;
        std::vector<UnitShard*> raw;
        for (auto& l : layouts) {
          shards.push_back(*UnitShard::Create(&l, *ZeroPolicy::ForStage(2), comms[r].get(), &tracker, DType::kBF16));
          raw.push_back(shards.back().get());
        }
        auto reducer = GradReducer::Create(raw, bucket_bytes, comms[r].get(), &tracker, DType::kF32);
        ASSERT_TRUE(reducer.ok()) << reducer.status();
        for (int u = 3; u >= 0; --u) {
          ASSERT_TRUE(shards[u]->EnsureFullGrads().ok());
          EXPECT_EQ(tracker.Usage(MemoryCategory::kGrads).current % 2, 0);
          uint16_t* g = static_cast<uint16_t*>(shards[u]->full_grads());
          for (int64_t i = 0; i < layouts[u].padded_numel(); ++i) g[i] = F32ToBF16(static_cast<float>(2 * r + u + i % 8));
          if (ClosesBucket(**reducer, u)) {
            ASSERT_TRUE((*reducer)->Launch((*reducer)->bucket_of(u)).ok());
          }
        }
        ASSERT_TRUE((*reducer)->FinishAll().ok());
        for (int u = 0; u < 4; ++u) {
          const int64_t S = layouts[u].shard_numel();
          for (int64_t i = 0; i < S; ++i) {
            const int64_t flat = r * S + i;
            const float avg = (static_cast<float>(u + flat % 8) + static_cast<float>(2 + u + flat % 8)) / 2;
            ASSERT_EQ(shards[u]->grad_shard()[i], avg) << "bucket_bytes " << bucket_bytes << " unit " << u;
          }
        }
        EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, 0);
      });
    }
    for (auto& t : threads) t.join();
  }
}

TEST(GradReducerTest, RejectsIntegerReduceDtypeAndMixedComputeDtypes) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(1);
  std::vector<FlatParamLayout> layouts = Layouts(1);
  MemoryTracker tracker;
  auto a = *UnitShard::Create(&layouts[0], *ZeroPolicy::ForStage(2), comms[0].get(), &tracker, DType::kF32);
  auto b = *UnitShard::Create(&layouts[1], *ZeroPolicy::ForStage(2), comms[0].get(), &tracker, DType::kBF16);
  absl::Status s = GradReducer::Create({a.get()}, 0, comms[0].get(), &tracker, DType::kI32).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "reduce dtype is i32, expected f32, bf16 or f16");
  s = GradReducer::Create({a.get(), b.get()}, 0, comms[0].get(), &tracker).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unit 'u1' computes in bf16, expected f32 like unit 'u0'");
}

// bucket_bytes counts what the reduce-scatter moves: in a bf16 reduce dtype
// twice the elements fit; units without gradients (null) are in no bucket.
TEST(GradReducerTest, BucketBytesAreTheReduceDtypesAndFrozenUnitsAreSkipped) {
  std::vector<FlatParamLayout> layouts = Layouts(1);  // P = 112, 16, 16, 208
  std::vector<const FlatParamLayout*> all = {&layouts[0], &layouts[1], &layouts[2], &layouts[3]};
  // 130 bytes: in f32, u1 + u2 (128 bytes) share a bucket.
  std::vector<GradBucket> f32 = FormGradBuckets(all, 130, DType::kF32);
  ASSERT_EQ(f32.size(), 3u);
  EXPECT_EQ(f32[1].units, std::vector<int>({1, 2}));
  std::vector<GradBucket> bf16 = FormGradBuckets(all, 64, DType::kBF16);
  ASSERT_EQ(bf16.size(), 3u);
  EXPECT_EQ(bf16[1].units, std::vector<int>({1, 2})) << "16 + 16 elements are 64 bf16 bytes";
  EXPECT_EQ(FormGradBuckets(all, 64, DType::kF32).size(), 4u) << "but 128 f32 bytes";
  std::vector<const FlatParamLayout*> frozen = all;
  frozen[1] = nullptr;
  std::vector<GradBucket> skipped = FormGradBuckets(frozen, 1 << 20, DType::kF32);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].units, std::vector<int>({0, 2, 3}));
  EXPECT_EQ(skipped[0].label, "u0..u3");
}

// With a slot plan the staging is allocated by ReserveStaging (sized for
// the largest bucket of each slot), reused by every bucket of the slot and
// freed by FreeStaging; a launch without a reservation fails.
TEST(GradReducerTest, StagingSlotsAreReservedOnceAndShared) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(1);
  std::vector<FlatParamLayout> layouts = Layouts(1);
  MemoryTracker tracker;
  std::vector<std::unique_ptr<UnitShard>> shards;
  std::vector<UnitShard*> raw;
  for (auto& l : layouts) {
    shards.push_back(*UnitShard::Create(&l, *ZeroPolicy::ForStage(2), comms[0].get(), &tracker));
    raw.push_back(shards.back().get());
  }
  auto reducer = GradReducer::Create(raw, 150, comms[0].get(), &tracker);  // buckets {3}, {1, 2}, {0}
  ASSERT_TRUE(reducer.ok());
  EXPECT_EQ((*reducer)->SetStagingSlots({0, 1}).message(), "staging plan lists 2 buckets, expected 3");
  ASSERT_TRUE((*reducer)->SetStagingSlots({0, 1, 0}).ok());
  for (int u = 0; u < 4; ++u) ASSERT_TRUE(shards[u]->EnsureFullGrads().ok());
  absl::Status s = (*reducer)->Launch(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "gradient bucket u3: staging slot not reserved (ReserveStaging)");
  ASSERT_TRUE((*reducer)->ReserveStaging().ok());
  // Slot 0: outputs of u3 (208) and u0 (112); slot 1: u1..u2 fused, in and out of 32.
  EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, (208 + 32 + 32) * 4);
  for (int b = 0; b < 3; ++b) {
    ASSERT_TRUE((*reducer)->Launch(b).ok());
    ASSERT_TRUE((*reducer)->Finish(b).ok());
  }
  EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, (208 + 32 + 32) * 4) << "no allocation per launch";
  (*reducer)->FreeStaging();
  EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, 0);
}

// Hybrid sharding on 4 ranks: shard groups {0, 1} and {2, 3}, replica
// groups {0, 2} and {1, 3}. Each bucket's replica all-reduce is issued by
// its Finish and completed by the next Finish, or at once when no bucket is
// left in flight; the shards then hold the average over all 4 ranks
// (integers and quarters: exact).
TEST(GradReducerTest, ReplicaAllReduceLandsAtTheNextFinish) {
  std::vector<std::vector<std::unique_ptr<Communicator>>> shard_groups, replica_groups;
  for (int g = 0; g < 2; ++g) shard_groups.push_back(CreateThreadGroup(2, "dp_shard"));
  for (int g = 0; g < 2; ++g) replica_groups.push_back(CreateThreadGroup(2, "dp_replica"));
  std::vector<FlatParamLayout> layouts = Layouts(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      Communicator* shard = shard_groups[r / 2][r % 2].get();
      Communicator* replica = replica_groups[r % 2][r / 2].get();
      MemoryTracker tracker;
      std::vector<std::unique_ptr<UnitShard>> shards;
      std::vector<UnitShard*> raw;
      for (auto& l : layouts) {
        shards.push_back(*UnitShard::Create(&l, *ZeroPolicy::ForStage(2), shard, &tracker));
        raw.push_back(shards.back().get());
      }
      ReductionOptions reduction;
      reduction.replica = replica;
      // 300-byte buckets at dp 2 (512, 128, 128, 896 bytes): {3}, {1, 2}, {0}.
      auto reducer = GradReducer::Create(raw, 300, shard, &tracker, DType::kF32, kernels::KernelContext::Cpu(1),
                                         reduction);
      ASSERT_TRUE(reducer.ok()) << reducer.status();
      ASSERT_EQ((*reducer)->num_buckets(), 3);
      for (int u = 0; u < 4; ++u) {
        ASSERT_TRUE(shards[u]->EnsureFullGrads().ok());
        float* g = static_cast<float*>(shards[u]->full_grads());
        for (int64_t i = 0; i < layouts[u].padded_numel(); ++i) g[i] = static_cast<float>(r * 1000 + u * 100 + i);
      }
      const auto landed = [&](int u) {
        const int64_t S = layouts[u].shard_numel();
        for (int64_t i = 0; i < S; ++i) {
          const int64_t flat = (r % 2) * S + i;
          // The average of r * 1000 over r = 0..3 is 1500.
          if (shards[u]->grad_shard()[i] != static_cast<float>(1500 + u * 100 + flat)) return false;
        }
        return true;
      };
      ASSERT_TRUE((*reducer)->Launch(0).ok());
      ASSERT_TRUE((*reducer)->Launch(1).ok());
      ASSERT_TRUE((*reducer)->Finish(0).ok());
      EXPECT_FALSE(landed(3)) << "bucket 0's replica all-reduce is still pending";
      EXPECT_EQ(shards[3]->full_grads(), nullptr) << "its full grads go once the reduce-scatter is done";
      ASSERT_TRUE((*reducer)->Launch(2).ok());
      ASSERT_TRUE((*reducer)->Finish(1).ok());
      EXPECT_TRUE(landed(3));
      EXPECT_FALSE(landed(1));
      ASSERT_TRUE((*reducer)->Finish(2).ok());  // the last one: lands at once, and so does the pending one
      for (int u = 0; u < 4; ++u) EXPECT_TRUE(landed(u)) << "unit " << u;
      ASSERT_TRUE((*reducer)->FinishAll().ok());
      EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, 0);
      EXPECT_EQ(replica->Stats()[CommOp::kAllReduce].calls, 3);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace zeroshard

namespace zeroshard {
namespace {

// int8 replica reduction, 4 ranks as above (replicas {0, 2} and {1, 3},
// blocks of 32): each shard is the f32 average of the two replicas'
// dequantized shards — within half a block scale of the exact average over
// all 4 ranks — the two replicas of a shard hold it bitwise alike, and the
// replica group moves one int8 AllGather per bucket, landing at the next
// Finish as the f32 all-reduce does. (ThreadCommunicator reduces f32 only:
// the bf16 reduce dtype is //tests/engine:replica_quantization_mpi_test's.)
TEST(GradReducerTest, QuantizedReplicasAverageDequantizedShardsBitwiseAlike) {
  constexpr int64_t kBlock = 32;
  const DType reduce_dtype = DType::kF32;
  std::vector<std::vector<std::unique_ptr<Communicator>>> shard_groups, replica_groups;
  for (int g = 0; g < 2; ++g) shard_groups.push_back(CreateThreadGroup(2, "dp_shard"));
  for (int g = 0; g < 2; ++g) replica_groups.push_back(CreateThreadGroup(2, "dp_replica"));
  std::vector<FlatParamLayout> layouts = Layouts(2);
  std::vector<std::vector<std::vector<float>>> result(4, std::vector<std::vector<float>>(4));
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      Communicator* shard = shard_groups[r / 2][r % 2].get();
      Communicator* replica = replica_groups[r % 2][r / 2].get();
      MemoryTracker tracker;
      std::vector<std::unique_ptr<UnitShard>> shards;
      std::vector<UnitShard*> raw;
      for (auto& l : layouts) {
        shards.push_back(*UnitShard::Create(&l, *ZeroPolicy::ForStage(2), shard, &tracker));
        raw.push_back(shards.back().get());
      }
      ReductionOptions reduction;
      reduction.replica = replica;
      reduction.replica_quantization_block = kBlock;
      auto reducer =
          GradReducer::Create(raw, 300, shard, &tracker, reduce_dtype, kernels::KernelContext::Cpu(1), reduction);
      ASSERT_TRUE(reducer.ok()) << reducer.status();
      for (int u = 0; u < 4; ++u) {
        ASSERT_TRUE(shards[u]->EnsureFullGrads().ok());
        float* g = static_cast<float*>(shards[u]->full_grads());
        // Not on the int8 grid: 0.37 steps, different per rank.
        for (int64_t i = 0; i < layouts[u].padded_numel(); ++i) g[i] = 0.37f * static_cast<float>(r * 7 + u * 3 + i);
      }
      const int buckets = (*reducer)->num_buckets();
      ASSERT_GE(buckets, 2);
      // Two in flight at a time, as the step program runs them.
      ASSERT_TRUE((*reducer)->Launch(0).ok());
      for (int b = 0; b < buckets; ++b) {
        if (b + 1 < buckets) {
          ASSERT_TRUE((*reducer)->Launch(b + 1).ok());
        }
        const absl::Status finished = (*reducer)->Finish(b);
        ASSERT_TRUE(finished.ok()) << DTypeName(reduce_dtype) << ": " << finished;
      }
      ASSERT_TRUE((*reducer)->FinishAll().ok());
      EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, 0);
      EXPECT_EQ(replica->Stats()[CommOp::kAllGather].calls, buckets);
      EXPECT_EQ(replica->Stats()[CommOp::kAllReduce].calls, 0);
      for (int u = 0; u < 4; ++u) {
        const int64_t S = layouts[u].shard_numel();
        // The shard group's average is 0.37 (7 (2g + 0.5) + 3u + flat); its
        // largest value in a block bounds the block's scale: amax / 127.
        for (int64_t i = 0; i < S; ++i) {
          const int64_t flat = (r % 2) * S + i;
          const double exact = 0.37 * (7 * 1.5 + 3 * u + flat);
          const double amax = 0.37 * (7 * 2.5 + 3 * u + (r % 2) * S + std::min(S, (i / kBlock + 1) * kBlock));
          EXPECT_NEAR(shards[u]->grad_shard()[i], exact, amax / 127 / 2 + 1e-4)
              << DTypeName(reduce_dtype) << " rank " << r << " unit " << u;
        }
        result[r][u].assign(shards[u]->grad_shard(), shards[u]->grad_shard() + S);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    for (int u = 0; u < 4; ++u) {
      EXPECT_EQ(result[r][u], result[r + 2][u])
          << DTypeName(reduce_dtype) << " replicas of shard " << r << ", unit " << u;
    }
  }
}

// int8 reduction over 3 ranks (ThreadCommunicator), fused and single
// buckets: each shard is the f32 average of the ranks' dequantized parts —
// within the average of their half scales of the exact average — the
// AllToAll moves the packed parts, and with error feedback the residual is
// what quantization dropped (a second reduction of zero gradients sends it).
TEST(GradReducerQuantizedTest, AveragesDequantizedPartsWithinHalfAScale) {
  constexpr int kRanks = 3;
  constexpr int64_t kBlock = 32;
  for (bool feedback : {false, true}) {
    for (int64_t bucket_bytes : {int64_t{0}, int64_t{1} << 20}) {
      std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(kRanks);
      std::vector<FlatParamLayout> layouts = Layouts(kRanks);
      std::vector<std::thread> threads;
      for (int r = 0; r < kRanks; ++r) {
        threads.emplace_back([&, r] {
          MemoryTracker tracker;
          std::vector<std::unique_ptr<UnitShard>> shards;
          std::vector<UnitShard*> raw;
          for (auto& l : layouts) {
            shards.push_back(*UnitShard::Create(&l, *ZeroPolicy::ForStage(2), comms[r].get(), &tracker));
            raw.push_back(shards.back().get());
          }
          ReductionOptions reduction;
          reduction.quantization_block = kBlock;
          reduction.error_feedback = feedback;
          auto reducer = GradReducer::Create(raw, bucket_bytes, comms[r].get(), &tracker, DType::kF32,
                                             kernels::KernelContext::Cpu(1), reduction);
          ASSERT_TRUE(reducer.ok()) << reducer.status();
          // Rank q's gradient element i of unit u: smooth, different per rank.
          const auto grad = [](int q, int u, int64_t i) {
            return static_cast<float>(0.01 * std::sin(0.37 * i + u + 1.3 * q));
          };
          const CommStats before = comms[r]->Stats();
          for (int u = 3; u >= 0; --u) {
            ASSERT_TRUE(shards[u]->EnsureFullGrads().ok());
            float* g = static_cast<float*>(shards[u]->full_grads());
            for (int64_t i = 0; i < layouts[u].padded_numel(); ++i) g[i] = i < layouts[u].numel() ? grad(r, u, i) : 0;
            if (ClosesBucket(**reducer, u)) ASSERT_TRUE((*reducer)->Launch((*reducer)->bucket_of(u)).ok());
          }
          ASSERT_TRUE((*reducer)->FinishAll().ok());
          const CommStats moved = comms[r]->Stats() - before;
          EXPECT_EQ(moved[CommOp::kReduceScatter].calls, 0);
          EXPECT_EQ(moved[CommOp::kAllToAll].calls, (*reducer)->num_buckets());
          for (int u = 0; u < 4; ++u) {
            const int64_t S = layouts[u].shard_numel(), begin = layouts[u].ShardBegin(r);
            // The half scale of each rank's block holding element i: the
            // block's amax / 254 (blocks restart at the parameter and at
            // the padding; padding is zero).
            for (int64_t j = 0; j < S; ++j) {
              const int64_t i = begin + j;
              double exact = 0, bound = 0;
              for (int q = 0; q < kRanks; ++q) {
                const double x = i < layouts[u].numel() ? grad(q, u, i) : 0;
                exact += x / kRanks;
                const int64_t run_begin = i < layouts[u].numel() ? begin : layouts[u].numel();
                const int64_t b0 = run_begin + (i - run_begin) / kBlock * kBlock;
                const int64_t b1 = std::min<int64_t>(b0 + kBlock, i < layouts[u].numel() ? layouts[u].numel() : begin + S);
                double amax = 0;
                for (int64_t k = std::max(b0, begin); k < std::min(b1, begin + S); ++k) {
                  amax = std::max(amax, std::fabs(k < layouts[u].numel() ? static_cast<double>(grad(q, u, k)) : 0.0));
                }
                bound += amax / 254 / kRanks;
              }
              EXPECT_LE(std::fabs(shards[u]->grad_shard()[j] - exact), bound * (1 + 1e-5) + 1e-9)
                  << "unit " << u << " rank " << r << " element " << j;
            }
          }
          if (!feedback) return;
          // Zero gradients next: what arrives is the average of the ranks'
          // residuals, quantized again — small, and not all zero.
          for (auto& s : shards) ASSERT_TRUE(s->ZeroGradShard().ok());
          for (int u = 3; u >= 0; --u) {
            ASSERT_TRUE(shards[u]->EnsureFullGrads().ok());
            ASSERT_TRUE(shards[u]->ZeroFullGrads().ok());
            if (ClosesBucket(**reducer, u)) ASSERT_TRUE((*reducer)->Launch((*reducer)->bucket_of(u)).ok());
          }
          ASSERT_TRUE((*reducer)->FinishAll().ok());
          double sent = 0;
          for (int u = 0; u < 4; ++u) {
            for (int64_t j = 0; j < layouts[u].shard_numel(); ++j) {
              EXPECT_LE(std::fabs(shards[u]->grad_shard()[j]), 0.01 / 254 * 1.01) << "unit " << u;
              sent += std::fabs(shards[u]->grad_shard()[j]);
            }
          }
          EXPECT_GT(sent, 0.0) << "error feedback sent nothing";
        });
      }
      for (auto& t : threads) t.join();
    }
  }
}

}  // namespace
}  // namespace zeroshard

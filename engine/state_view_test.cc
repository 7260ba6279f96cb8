// The state view (engine/state_view.h) over the toy model at dp 2: its kinds
// per optimizer, each unit's regions and bytes against the shard layout and
// the memory categories (docs/sharding.md), and writes that training and
// GatherParam then see.
#include "engine/state_view.h"

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

constexpr int kDp = 2;
constexpr int kGlobalBatch = 4;
const ToyModelConfig kToy{2, 16, 67, 8};

EngineConfig Config(int stage, OptimizerConfig::Type optimizer, float momentum, DTypeProto compute) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_parallel()->set_dp(kDp);
  c.mutable_optimizer()->set_type(optimizer);
  c.mutable_optimizer()->set_lr(1e-3);
  c.mutable_optimizer()->set_momentum(momentum);
  c.mutable_precision()->set_compute_dtype(compute);
  c.mutable_device()->set_threads_per_rank(1);
  return c;
}

template <typename Fn>
void OnRanks(Fn fn) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(kDp);
  std::vector<std::thread> threads;
  for (int r = 0; r < kDp; ++r) threads.emplace_back([&, r] { fn(r, comms[r].get()); });
  for (std::thread& t : threads) t.join();
}

std::vector<std::string> Names(const EngineStateView& view, bool checkpoint) {
  std::vector<std::string> out;
  for (const StateKindInfo& k : view.kinds()) out.push_back(checkpoint ? k.checkpoint_name : k.name);
  return out;
}

TEST(StateViewTest, KindsFollowTheOptimizer) {
  struct Case {
    OptimizerConfig::Type type;
    float momentum;
    std::vector<std::string> names, checkpoint_names;
  };
  const std::vector<Case> cases = {
      {OptimizerConfig::ADAMW, 0, {"params", "master", "grad", "exp_avg", "exp_avg_sq"},
       {"", "master", "", "exp_avg", "exp_avg_sq"}},
      {OptimizerConfig::SGD, 0.9f, {"params", "master", "grad", "momentum"}, {"", "master", "", "momentum"}},
      {OptimizerConfig::SGD, 0, {"params", "master", "grad"}, {"", "master", ""}},
  };
  for (const Case& c : cases) {
    OnRanks([&](int rank, Communicator* comm) {
      auto engine = Engine::CreateWithCommunicator(Config(1, c.type, c.momentum, BF16), comm, BuildToyModel(kToy));
      ASSERT_TRUE(engine.ok()) << engine.status();
      const EngineStateView& view = (*engine)->state();
      EXPECT_EQ(Names(view, false), c.names);
      EXPECT_EQ(Names(view, true), c.checkpoint_names);
      EXPECT_EQ(view.kinds()[EngineStateView::kParams].dtype, DType::kBF16);
      EXPECT_EQ(view.kinds()[EngineStateView::kParams].bytes_per_element, 2);
      EXPECT_EQ(view.FindKind("master"), EngineStateView::kMaster);
      EXPECT_EQ(view.FindKind("exp_avg"), c.type == OptimizerConfig::ADAMW ? 3 : -1);
      EXPECT_EQ(view.FindKind("nothing"), -1);
    });
  }
}

// Regions per unit (S = shard numel, P = padded numel, c = compute bytes):
//   stage | params            | master            | grad                  | optimizer kinds
//   0     | [0, P), P·c       | [0, P), 4P        | none at rest          | master's region, 4 each
//   1     | [0, P), P·c       | [rS, +S), 4S      | none at rest          |
//   2     | [0, P), P·c       | [rS, +S), 4S      | [rS, +S), 4S          |
//   3     | [rS, +S), S·c     | [rS, +S), 4S      | [rS, +S), 4S          |
// and their sums are the memory categories at rest, before and after a step
// (bf16: before, the toy model computing in f32 only).
TEST(StateViewTest, RegionsAndBytesMatchTheShardLayoutAndTheMemoryCategories) {
  const std::vector<int32_t> tokens = RandomTokens(5, kGlobalBatch, kToy.seq_len, kToy.vocab_size);
  for (int stage = 0; stage <= 3; ++stage) {
    for (DTypeProto compute : {F32, BF16}) {
      SCOPED_TRACE(absl::StrCat("stage ", stage, " compute ", DTypeProto_Name(compute)));
      OnRanks([&](int rank, Communicator* comm) {
        auto engine =
            Engine::CreateWithCommunicator(Config(stage, OptimizerConfig::ADAMW, 0, compute), comm, BuildToyModel(kToy));
        ASSERT_TRUE(engine.ok()) << engine.status();
        Engine& e = **engine;
        const EngineStateView& view = e.state();
        const int64_t c = compute == F32 ? 4 : 2;
        ASSERT_EQ(view.num_units(), e.num_units());
        std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kGlobalBatch, kToy.seq_len, kDp, 1, rank);
        // The toy model computes in f32 only: bf16 is checked at rest.
        for (int after_step = 0; after_step < (compute == F32 ? 2 : 1); ++after_step) {
          if (after_step == 1) {
            ASSERT_TRUE(e.TrainStep(Views(batches)).ok());
          }
          int64_t sums[5] = {0, 0, 0, 0, 0};
          for (int u = 0; u < e.num_units(); ++u) {
            const FlatParamLayout& l = e.layout(u);
            const int64_t S = l.shard_numel(), P = l.padded_numel(), rS = l.ShardBegin(rank);
            const StateRegion params = view.region(u, EngineStateView::kParams);
            const StateRegion master = view.region(u, EngineStateView::kMaster);
            const StateRegion grad = view.region(u, EngineStateView::kGrad);
            EXPECT_TRUE(params.present);
            EXPECT_EQ(params.begin, stage == 3 ? rS : 0) << u;
            EXPECT_EQ(params.length, stage == 3 ? S : P) << u;
            EXPECT_EQ(params.bytes, params.length * c) << u;
            EXPECT_EQ(params.shape, std::vector<int64_t>{params.length});
            EXPECT_EQ(master.begin, stage == 0 ? 0 : rS) << u;
            EXPECT_EQ(master.length, stage == 0 ? P : S) << u;
            EXPECT_EQ(master.bytes, 4 * master.length) << u;
            EXPECT_EQ(grad.present, stage >= 2) << u;
            EXPECT_EQ(grad.begin, stage >= 2 ? rS : 0) << u;
            EXPECT_EQ(grad.bytes, stage >= 2 ? 4 * S : 0) << u;
            for (int k = EngineStateView::kFirstOptimizerKind; k < view.num_kinds(); ++k) {
              const StateRegion state = view.region(u, k);
              EXPECT_TRUE(state.present) << u;
              EXPECT_EQ(state.begin, master.begin) << u;
              EXPECT_EQ(state.bytes, master.bytes) << u;
              sums[3] += state.bytes;
            }
            sums[0] += params.bytes;
            sums[1] += master.bytes;
            sums[2] += grad.bytes;
          }
          const MemoryTracker& m = e.memory();
          EXPECT_EQ(sums[0], m.Usage(MemoryCategory::kParams).current);
          EXPECT_EQ(sums[1], m.Usage(MemoryCategory::kMasterParams).current);
          EXPECT_EQ(sums[3], m.Usage(MemoryCategory::kOptimizerState).current);
          if (stage >= 2) {
            EXPECT_EQ(sums[2], m.Usage(MemoryCategory::kGrads).current);
          }
        }
      });
    }
  }
}

// A value per element of the unit's flat buffer that no training produces.
float Pattern(int unit, int64_t element) { return static_cast<float>(unit * 1000 + element) * 0.25f; }

TEST(StateViewTest, WrittenMastersReadBackAndCommitPublishesThem) {
  for (int stage : {0, 3}) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    OnRanks([&](int rank, Communicator* comm) {
      auto engine =
          Engine::CreateWithCommunicator(Config(stage, OptimizerConfig::ADAMW, 0, F32), comm, BuildToyModel(kToy));
      ASSERT_TRUE(engine.ok()) << engine.status();
      Engine& e = **engine;
      EngineStateView& view = e.state();
      for (int u = 0; u < e.num_units(); ++u) {
        const StateRegion master = view.region(u, EngineStateView::kMaster);
        std::vector<float> in(master.length), out(master.length, -1.0f);
        for (int64_t i = 0; i < master.length; ++i) in[i] = Pattern(u, master.begin + i);
        ASSERT_TRUE(view.Write(u, EngineStateView::kMaster, 0, master.length, in.data()).ok());
        ASSERT_TRUE(view.Read(u, EngineStateView::kMaster, 0, master.length, out.data()).ok());
        EXPECT_EQ(std::memcmp(in.data(), out.data(), in.size() * sizeof(float)), 0) << u;
        // An optimizer state kind round-trips too (a slice of it).
        const int k = view.FindKind("exp_avg_sq");
        if (master.length >= 3) {
          const float v[2] = {7.5f, -2.25f};
          float back[2] = {0, 0};
          ASSERT_TRUE(view.Write(u, k, 1, 2, v).ok());
          ASSERT_TRUE(view.Read(u, k, 1, 2, back).ok());
          EXPECT_EQ(back[0], v[0]);
          EXPECT_EQ(back[1], v[1]);
        }
        const absl::Status past = view.Read(u, EngineStateView::kMaster, master.length, 1, out.data());
        EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
      }
      EXPECT_EQ(view.Read(e.num_units(), EngineStateView::kMaster, 0, 0, nullptr).code(),
                absl::StatusCode::kInvalidArgument);
      ASSERT_TRUE(view.Commit().ok());
      // Every rank sees the written weights, whole (GatherParam gathers the masters).
      for (int u = 0; u < e.num_units(); ++u) {
        for (const FlatParamInfo& p : e.layout(u).params()) {
          absl::StatusOr<std::vector<float>> w = e.GatherParam(p.name);
          ASSERT_TRUE(w.ok()) << w.status();
          ASSERT_EQ(static_cast<int64_t>(w->size()), p.numel) << p.name;
          for (int64_t j = 0; j < p.numel; ++j) ASSERT_EQ((*w)[j], Pattern(u, p.offset + j)) << p.name << " " << j;
        }
      }
      // The compute parameters are the masters, rounded (f32 here: equal).
      const StateRegion params = view.region(0, EngineStateView::kParams);
      std::vector<float> compute(params.length);
      ASSERT_TRUE(view.Read(0, EngineStateView::kParams, 0, params.length, compute.data()).ok());
      for (int64_t i = 0; i < std::min<int64_t>(params.length, e.layout(0).numel() - params.begin); ++i) {
        ASSERT_EQ(compute[i], Pattern(0, params.begin + i)) << i;
      }
    });
  }
}

}  // namespace
}  // namespace zeroshard

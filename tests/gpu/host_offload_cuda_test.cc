// Host offload on CUDA (docs/offload.md, "Host offload on GPU") under
// mpirun on one GPU (tools/gpu-check, part "engine"): optimizer state and
// masters in pinned host memory, the update on the CPU. ZeRO 0-3 train GPT-2
// tiny like the same CUDA run without offload within the documented
// tolerance (f32 1e-4, bf16 1e-3 relative); fed the CUDA run's final
// gradients, the CPU engine's update gives bitwise its masters, compute
// parameters and optimizer state. Skips without a usable GPU.
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "engine/engine.h"
#include "engine/observer.h"
#include "engine/state_view.h"
#include "engine/testing/tiny_gpt2.h"
#include "engine/testing/weights.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "tests/gpu/gpu_training.h"

namespace zeroshard {
namespace {

constexpr int kSteps = 4;

TrainConfig HostOffload(TrainConfig t) {
  t.mutable_engine()->mutable_offload()->set_optimizer_state(HOST);
  t.mutable_engine()->mutable_offload()->set_master_weights(HOST);
  return t;
}

TEST(HostOffloadCudaTest, TrainsLikeNoOffloadOnCuda) {
  ZS_SKIP_WITHOUT_GPU();
  for (DTypeProto dtype : {DTypeProto::F32, DTypeProto::BF16}) {
    const double tolerance = dtype == DTypeProto::F32 ? 1e-4 : 1e-3;
    for (int stage = 0; stage <= 3; ++stage) {
      const std::string what = std::string(DTypeProto_Name(dtype)) + " stage " + std::to_string(stage);
      const TrainConfig plain = GpuTestConfig(Device::kCuda, stage, dtype);
      TrainedRun offloaded = Train(HostOffload(plain), kSteps);
      TrainedRun reference = Train(plain, kSteps);
      ASSERT_NE(offloaded.engine, nullptr) << what;
      ASSERT_NE(reference.engine, nullptr) << what;
      ASSERT_EQ(offloaded.losses.size(), reference.losses.size()) << what;
      for (size_t i = 0; i < reference.losses.size(); ++i) {
        EXPECT_NEAR(offloaded.losses[i], reference.losses[i], tolerance * std::fabs(reference.losses[i]))
            << what << " step " << i;
      }
      EXPECT_LT(RelativeL2(GatherWeights(*offloaded.engine), GatherWeights(*reference.engine)), tolerance) << what;
      EXPECT_NE(reference.losses.front(), reference.losses.back()) << what << ": training moved nothing";
    }
  }
}

// Each unit's final gradient of each attempt, as the CUDA engine applies it.
class RecordGradients : public EngineObserver {
 public:
  void OnFinalGradient(const GradientEvent& g) override {
    std::vector<float>& h = grads[{g.attempt, g.unit}];
    h.assign(static_cast<size_t>(g.numel), 0.0f);
    const absl::Status s = DeviceCopy(h.data(), Device::kCpu, g.shard, Device::kCuda, h.size() * sizeof(float));
    EXPECT_TRUE(s.ok()) << s;
  }
  std::map<std::pair<int64_t, int>, std::vector<float>> grads;
};

// Puts the recorded gradients into a CPU engine right before its update.
class ReplayGradients : public EngineObserver {
 public:
  explicit ReplayGradients(const RecordGradients* recorded) : recorded_(recorded) {}
  void OnFinalGradient(const GradientEvent& g) override {
    auto it = recorded_->grads.find({g.attempt, g.unit});
    ASSERT_NE(it, recorded_->grads.end()) << "no CUDA gradient for attempt " << g.attempt << " unit " << g.unit;
    ASSERT_EQ(static_cast<int64_t>(it->second.size()), g.numel);
    std::memcpy(g.shard, it->second.data(), it->second.size() * sizeof(float));
    ++replayed;
  }
  int replayed = 0;

 private:
  const RecordGradients* recorded_;
};

TrainedRun Create(const TrainConfig& config, Device device, EngineObserver* observer) {
  TrainedRun run;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(
      config.engine(), RuntimeFor(device).grid.get(), std::move(BuildGpt2(TinyGpt2(2))).value(), {observer});
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (engine.ok()) run.engine = std::move(*engine);
  return run;
}

// Every kind but the gradient, of every unit of this rank, as bytes.
std::vector<std::vector<char>> State(const Engine& engine) {
  const EngineStateView& view = engine.state();
  std::vector<std::vector<char>> out;
  for (int u = 0; u < view.num_units(); ++u) {
    for (int k = 0; k < view.num_kinds(); ++k) {
      const StateRegion r = view.region(u, k);
      std::vector<char> bytes;
      if (view.kinds()[k].name != "grad" && r.present && r.length > 0) {
        bytes.resize(static_cast<size_t>(r.bytes));
        const absl::Status s = view.Read(u, k, 0, r.length, bytes.data());
        EXPECT_TRUE(s.ok()) << s;
      }
      out.push_back(std::move(bytes));
    }
  }
  return out;
}

TEST(HostOffloadCudaTest, TheUpdateGivesTheCpuEnginesBits) {
  ZS_SKIP_WITHOUT_GPU();
  for (DTypeProto dtype : {DTypeProto::F32, DTypeProto::BF16}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const std::string what = std::string(DTypeProto_Name(dtype)) + " stage " + std::to_string(stage);
      RecordGradients recorded;
      ReplayGradients replay(&recorded);
      TrainedRun gpu = Create(HostOffload(GpuTestConfig(Device::kCuda, stage, dtype)), Device::kCuda, &recorded);
      TrainedRun cpu = Create(GpuTestConfig(Device::kCpu, stage, dtype), Device::kCpu, &replay);
      ASSERT_NE(gpu.engine, nullptr) << what;
      ASSERT_NE(cpu.engine, nullptr) << what;
      // The same initial state (initialised on the host on both devices).
      ASSERT_TRUE(State(*gpu.engine) == State(*cpu.engine)) << what;
      for (int step = 0; step < kSteps; ++step) {
        TrainMore(gpu, GpuTestConfig(Device::kCuda, stage, dtype), 1);
        TrainMore(cpu, GpuTestConfig(Device::kCpu, stage, dtype), 1);
        const std::vector<std::vector<char>> g = State(*gpu.engine), c = State(*cpu.engine);
        ASSERT_EQ(g.size(), c.size());
        const int kinds = gpu.engine->state().num_kinds();
        for (size_t i = 0; i < g.size(); ++i) {
          EXPECT_TRUE(g[i] == c[i]) << what << " step " << step << ": unit " << i / kinds << " kind '"
                                    << gpu.engine->state().kinds()[i % kinds].name << "' differs";
        }
      }
      EXPECT_GT(replay.replayed, 0) << what;
    }
  }
}

}  // namespace
}  // namespace zeroshard

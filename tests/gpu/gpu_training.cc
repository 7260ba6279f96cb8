#include "tests/gpu/gpu_training.h"

#include <cstdlib>
#include <map>
#include <utility>

#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"

namespace zeroshard {
namespace {

constexpr int kAccumulation = 2;

int GlobalBatch() { return 2 * MpiWorldSize() * kAccumulation; }

}  // namespace

EngineRuntime& RuntimeFor(Device device, int pp) {
  static std::map<std::pair<Device, int>, std::unique_ptr<EngineRuntime>> runtimes;
  std::unique_ptr<EngineRuntime>& rt = runtimes[{device, pp}];
  if (rt == nullptr) {
    CommOptions options;
    options.timeout = absl::Seconds(120);
    absl::StatusOr<EngineRuntime> created =
        CreateEngineRuntime(GpuTestConfig(device, 1, DTypeProto::F32, pp).engine(), options);
    if (!created.ok()) {
      ADD_FAILURE() << "CreateEngineRuntime(" << DeviceName(device) << "): " << created.status();
      std::abort();
    }
    rt = std::make_unique<EngineRuntime>(std::move(*created));
  }
  return *rt;
}

TrainConfig GpuTestConfig(Device device, int stage, DTypeProto compute_dtype, int pp) {
  TrainConfig t;
  const Gpt2Config m = TinyGpt2(2);
  t.mutable_model()->set_n_layer(m.n_layer);
  t.mutable_model()->set_n_head(m.n_head);
  t.mutable_model()->set_n_embd(m.n_embd);
  t.mutable_model()->set_vocab_size(m.vocab_size);
  t.mutable_model()->set_seq_len(m.seq_len);
  t.mutable_data()->set_batch_size(GlobalBatch());
  EngineConfig& e = *t.mutable_engine();
  e.mutable_zero()->set_stage(stage);
  e.mutable_zero()->set_bucket_bytes(4096);
  e.set_gradient_accumulation_steps(kAccumulation);
  e.mutable_parallel()->set_dp(MpiWorldSize() / pp);
  e.mutable_parallel()->set_pp(pp);
  e.mutable_precision()->set_compute_dtype(compute_dtype);
  e.mutable_optimizer()->set_lr(1e-3);
  e.mutable_optimizer()->set_weight_decay(0.1);
  e.mutable_optimizer()->set_grad_clip(1.0);
  e.mutable_device()->set_type(device == Device::kCuda ? DeviceConfig::CUDA : DeviceConfig::CPU);
  e.mutable_device()->set_threads_per_rank(1);
  e.set_seed(11);
  return t;
}

void TrainMore(TrainedRun& run, const TrainConfig& config, int steps) {
  const int dp = config.engine().parallel().dp();
  const Device device = config.engine().device().type() == DeviceConfig::CUDA ? Device::kCuda : Device::kCpu;
  const int rank = RuntimeFor(device, config.engine().parallel().pp()).grid->dp_rank();
  for (int i = 0; i < steps && run.engine != nullptr; ++i) {
    const int64_t s = run.engine->stats().step;
    const std::vector<int32_t> tokens = RandomTokens(static_cast<uint32_t>(100 + s), GlobalBatch(), 8, 67);
    std::vector<HostBatch> batches = MicroBatchesForRank(tokens, GlobalBatch(), 8, dp, kAccumulation, rank);
    absl::StatusOr<StepResult> result = run.engine->TrainStep(Views(batches));
    ASSERT_TRUE(result.ok()) << result.status();
    run.losses.push_back(result->loss);
  }
}

TrainedRun Train(const TrainConfig& config, int steps) {
  const Device device = config.engine().device().type() == DeviceConfig::CUDA ? Device::kCuda : Device::kCpu;
  TrainedRun run;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(config.engine(), RuntimeFor(device, config.engine().parallel().pp()).grid.get(),
                     std::move(BuildGpt2(TinyGpt2(2))).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  run.engine = std::move(*engine);
  TrainMore(run, config, steps);
  return run;
}

}  // namespace zeroshard

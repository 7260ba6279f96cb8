// Training GPT-2 tiny on a device for the GPU tests: the runtime of each
// device (created once per process, collective over the MPI world), a
// config, and a run of n steps on fixed data.
#ifndef ZEROSHARD_TESTS_GPU_GPU_TRAINING_H_
#define ZEROSHARD_TESTS_GPU_GPU_TRAINING_H_

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "engine/engine.h"
#include "engine/engine_runtime.h"
#include "engine/testing/weights.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2_config.pb.h"

// Skips the calling test with the driver's reason when no GPU is usable.
#define ZS_SKIP_WITHOUT_GPU()                                                       \
  do {                                                                              \
    std::string zs_gpu_reason;                                                      \
    if (!::zeroshard::CudaAvailable(&zs_gpu_reason)) GTEST_SKIP() << zs_gpu_reason; \
  } while (0)

namespace zeroshard {

// The runtime for `device` with pp pipeline stages and dp = world / pp
// (created on first use; a creation failure fails the test and aborts).
EngineRuntime& RuntimeFor(Device device, int pp = 1);

// GPT-2 tiny (V 67, C 16, T 8), dp = world / pp, 2 micro-batches per step.
TrainConfig GpuTestConfig(Device device, int stage, DTypeProto compute_dtype, int pp = 1);

struct TrainedRun {
  std::unique_ptr<Engine> engine;
  std::vector<float> losses;
};

// `steps` steps from a fresh engine; step s reads tokens drawn from seed
// 100 + s, the same on every device.
TrainedRun Train(const TrainConfig& config, int steps);
// `steps` more steps of an existing engine (continuing its step count).
void TrainMore(TrainedRun& run, const TrainConfig& config, int steps);

}  // namespace zeroshard

#endif  // ZEROSHARD_TESTS_GPU_GPU_TRAINING_H_

// OffloadSupported (engine/engine_impl.h) accepts exactly what the engine
// builds: on a CUDA device HOST optimizer state with HOST masters (host
// offload, docs/offload.md), nothing else off the device.
#include <string>

#include "engine/engine_impl.h"
#include "engine/engine_options.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::string Supported(Device device, OffloadTier state, OffloadTier master, OffloadTier grads = OffloadTier::kDevice) {
  EngineOptions o;
  o.device = device;
  o.offload.optimizer_state = state;
  o.offload.master_weights = master;
  o.offload.grads = grads;
  const absl::Status s = OffloadSupported(o);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  }
  return s.ok() ? "ok" : std::string(s.message());
}

TEST(OffloadSupportedTest, CudaTakesHostStateWithHostMastersOnly) {
  constexpr OffloadTier D = OffloadTier::kDevice, H = OffloadTier::kHost, N = OffloadTier::kNvme;
  EXPECT_EQ(Supported(Device::kCuda, H, H), "ok");
  EXPECT_EQ(Supported(Device::kCuda, D, D), "ok");
  EXPECT_EQ(Supported(Device::kCuda, H, D),
            "engine.offload.optimizer_state: HOST is implemented on a CUDA device only with optimizer_state and "
            "master_weights both HOST");
  EXPECT_EQ(Supported(Device::kCuda, D, H),
            "engine.offload.master_weights: HOST is implemented on a CUDA device only with optimizer_state and "
            "master_weights both HOST");
  EXPECT_EQ(Supported(Device::kCuda, H, H, H), "engine.offload.grads: HOST is not implemented on a CUDA device yet");
  EXPECT_EQ(Supported(Device::kCuda, N, D),
            "engine.offload.optimizer_state: NVME is not implemented on a CUDA device yet");
  // A CPU device: HOST is its memory, any class alone.
  EXPECT_EQ(Supported(Device::kCpu, H, D), "ok");
  EXPECT_EQ(Supported(Device::kCpu, D, H, H), "ok");
}

}  // namespace
}  // namespace zeroshard

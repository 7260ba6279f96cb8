// GPT-2 on CUDA against the same model on CPU: loss and every gradient.
// Skips (with the reason) without a CUDA build or a usable GPU; tools/gpu-check
// runs it. Tolerance |gpu - cpu| <= 1e-5 + 1e-3 |cpu| (different summation
// orders in cuBLAS and the reductions).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "nn/resident_model.h"
#include "nn/testing/grad_check.h"

#ifdef ZEROSHARD_HAS_CUDA
#include "kernels/cuda/cuda_resources.h"
#endif

namespace zeroshard {
namespace {

TEST(Gpt2GpuTest, ForwardBackwardMatchesCpu) {
#ifndef ZEROSHARD_HAS_CUDA
  GTEST_SKIP() << "built without CUDA (--//bazel:cuda=false or no nvcc)";
#else
  std::string reason;
  if (!CudaAvailable(&reason)) GTEST_SKIP() << reason;
  auto resources = kernels::cuda::CudaResources::Create();
  ASSERT_TRUE(resources.ok()) << resources.status();

  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const Gpt2Config cfg{2, 4, 32, 96, 16};
  const int64_t b = 2, t = 16;
  auto model = BuildGpt2(cfg).value();
  ComputeContext cpu_ctx;
  ComputeContext gpu_ctx;
  gpu_ctx.kernels = (*resources)->context();
  auto cpu = ResidentModel::Create(model.get(), cpu_ctx).value();
  auto gpu = ResidentModel::Create(model.get(), gpu_ctx).value();
  ASSERT_TRUE(cpu.InitParams(seed).ok());
  ASSERT_TRUE(gpu.InitParams(seed).ok());

  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(b * t), targets(b * t);
  for (auto& x : tokens) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  for (auto& x : targets) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  const Batch host_batch = Gpt2Batch(testing::HostView(tokens, {b, t}), testing::HostView(targets, {b, t}));
  void* d_tokens = DeviceAlloc(Device::kCuda, tokens.size() * 4).value();
  void* d_targets = DeviceAlloc(Device::kCuda, targets.size() * 4).value();
  ASSERT_TRUE(DeviceCopy(d_tokens, Device::kCuda, tokens.data(), Device::kCpu, tokens.size() * 4).ok());
  ASSERT_TRUE(DeviceCopy(d_targets, Device::kCuda, targets.data(), Device::kCpu, targets.size() * 4).ok());
  const Batch gpu_batch = Gpt2Batch(TensorView{d_tokens, DType::kI32, {b, t}, Device::kCuda},
                                    TensorView{d_targets, DType::kI32, {b, t}, Device::kCuda});

  auto cpu_loss = cpu.ForwardBackward(host_batch, 1.0f / (b * t));
  auto gpu_loss = gpu.ForwardBackward(gpu_batch, 1.0f / (b * t));
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  ASSERT_TRUE(gpu_loss.ok()) << gpu_loss.status();
  EXPECT_EQ(gpu_loss->loss.weight, cpu_loss->loss.weight);
  EXPECT_NEAR(gpu_loss->loss.sum, cpu_loss->loss.sum, 1e-5 * std::fabs(cpu_loss->loss.sum));
  for (int u = 0; u < cpu.num_units(); ++u) {
    std::vector<float> from_gpu(gpu.unit_grads(u).numel());
    ASSERT_TRUE(DeviceCopy(from_gpu.data(), Device::kCpu, gpu.unit_grads(u).data(), Device::kCuda,
                           from_gpu.size() * 4).ok());
    const float* c = cpu.unit_grads(u).as<float>();
    testing::ExpectAllClose(from_gpu, std::vector<double>(c, c + from_gpu.size()), 1e-5, 1e-3,
                            model->units[u]->name() + " grads");
  }
  DeviceFree(Device::kCuda, d_tokens);
  DeviceFree(Device::kCuda, d_targets);
#endif
}

}  // namespace
}  // namespace zeroshard

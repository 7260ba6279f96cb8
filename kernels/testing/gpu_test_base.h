// GpuTestBase: the fixture of the GPU kernels' tolerance tests — a CUDA
// stream and cuBLAS handle (gpu_) next to the CPU reference context (cpu_);
// skips, with the driver's reason, when there is no usable GPU. Only with
// ZEROSHARD_HAS_CUDA.
#ifndef ZEROSHARD_KERNELS_TESTING_GPU_TEST_BASE_H_
#define ZEROSHARD_KERNELS_TESTING_GPU_TEST_BASE_H_

#ifdef ZEROSHARD_HAS_CUDA

#include <memory>
#include <string>
#include <utility>

#include "core/device.h"
#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cuda/cuda_resources.h"

namespace zeroshard::kernels::testing {

template <typename Base = ::testing::Test>
class GpuTestBase : public Base {
 protected:
  void SetUp() override {
    std::string reason;
    if (!CudaAvailable(&reason)) GTEST_SKIP() << reason;
    auto r = cuda::CudaResources::Create();
    ASSERT_TRUE(r.ok()) << r.status();
    resources_ = std::move(*r);
    gpu_ = resources_->context();
  }
  // Waits for the GPU and reports asynchronous kernel errors.
  void Sync() { ASSERT_TRUE(resources_->Synchronize().ok()); }

  std::unique_ptr<cuda::CudaResources> resources_;
  KernelContext gpu_;
  const KernelContext cpu_ = KernelContext::Cpu();
};

}  // namespace zeroshard::kernels::testing

#endif  // ZEROSHARD_HAS_CUDA

#endif  // ZEROSHARD_KERNELS_TESTING_GPU_TEST_BASE_H_

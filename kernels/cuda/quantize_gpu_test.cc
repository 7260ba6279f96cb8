// The int8 block quantization on CUDA against the CPU on the same random
// inputs. Tolerance: none, for every dtype. Both devices do the same IEEE
// f32/f64 operations per element (kernels/quantize_math.h, no FMA
// contraction) and a max is exact in any order, so the packed bytes (int8
// values, padding, scales, NaN scales included), residuals and dequantized
// values must be bitwise equal. Skips (with the reason) when there is no
// usable GPU or no CUDA build.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "gtest/gtest.h"
#include "kernels/quantize.h"
#include "kernels/testing/device_array.h"
#include "kernels/testing/gpu_test_base.h"
#include "kernels/testing/kernel_test_util.h"

#ifdef ZEROSHARD_HAS_CUDA
#include "kernels/cuda/cuda_resources.h"
#endif

namespace zeroshard::kernels {
namespace {

using testing::HostTensor;

#ifndef ZEROSHARD_HAS_CUDA

TEST(QuantizeGpu, Skipped) { GTEST_SKIP() << "built without CUDA (--//bazel:cuda=false or no nvcc)"; }

#else

using testing::DeviceArray;

template <typename T>
std::vector<unsigned char> BytesOf(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<unsigned char> BytesOf(const HostTensor& t) {
  std::vector<unsigned char> b(t.size() * DTypeSize(t.dtype()));
  std::memcpy(b.data(), t.data(), b.size());
  return b;
}

// Index of the first differing byte, or -1.
int64_t FirstDifference(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

class QuantizeGpuTest : public testing::GpuTestBase<::testing::TestWithParam<DType>> {
 protected:
  testing::Rng rng_{testing::TestSeed()};
};

struct Shape {
  int64_t n, block;
};
// Short last blocks, n < block, n not a multiple of 4, and more blocks than
// the scale kernel's grid (65535 * 8) so its block loop wraps.
constexpr Shape kShapes[] = {{2 * 2048 + 5, 2048}, {100, 2048}, {10007, 32}, {37, 5},
                             {(1 << 20) + 3, 256}, {600001, 1}};

// Values of varied magnitude per block, with zero blocks and, when asked,
// inf/NaN in a few blocks.
std::vector<double> Inputs(testing::Rng& rng, Shape s, bool non_finite) {
  std::vector<double> x = rng.Uniform(s.n, -3, 3);
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t b = i / s.block;
    x[i] = b % 11 == 4 ? 0.0 : std::ldexp(x[i], static_cast<int>(b % 9) - 4);
  }
  if (non_finite) {
    x[s.n / 3] = std::numeric_limits<double>::quiet_NaN();
    x[s.n / 2] = std::numeric_limits<double>::infinity();
    x[s.n - 1] = -std::numeric_limits<double>::infinity();
  }
  return x;
}

TEST_P(QuantizeGpuTest, QuantizeDequantizeBitwiseAsCpu) {
  const DType dt = GetParam();
  for (const Shape s : kShapes) {
    for (const bool with_residual : {false, true}) {
      for (const bool non_finite : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n " << s.n << " block " << s.block << " residual " << with_residual
                                          << " non-finite " << non_finite);
        const int64_t n = s.n, block = s.block, bytes = Int8PackedBytes(n, block);
        HostTensor x = HostTensor::From(dt, Inputs(rng_, s, non_finite));
        const std::vector<double> r = rng_.Uniform(n, -1e-3, 1e-3);
        std::vector<float> residual(r.begin(), r.end());
        std::vector<uint32_t> packed(bytes / 4, 0xabababab);
        DeviceArray gx(x), gresidual(residual), gpacked(packed);
        float* cpu_residual = with_residual ? residual.data() : nullptr;
        float* gpu_residual = with_residual ? gresidual.as<float>() : nullptr;
        const NonFiniteInput policy = non_finite ? NonFiniteInput::kPropagate : NonFiniteInput::kReject;
        ASSERT_TRUE(QuantizeInt8Blocks(cpu_, packed.data(), x.data(), dt, n, block, policy, cpu_residual).ok());
        ASSERT_TRUE(QuantizeInt8Blocks(gpu_, gpacked.get(), gx.get(), dt, n, block, policy, gpu_residual).ok());
        Sync();
        const int64_t at = FirstDifference(gpacked.Bytes(), BytesOf(packed));
        EXPECT_EQ(at, -1) << "packed byte " << at << " of " << bytes << " (scales from " << (n + 3) / 4 * 4 << ")";
        if (with_residual) {
          const int64_t rat = FirstDifference(gresidual.Bytes(), BytesOf(residual));
          EXPECT_EQ(rat, -1) << "residual byte " << rat;
        }
        for (DType out_dt : {DType::kF32, DType::kBF16, DType::kF16}) {
          HostTensor out = HostTensor::Poisoned(out_dt, n);
          DeviceArray gout(out);
          ASSERT_TRUE(DequantizeInt8Blocks(cpu_, out.data(), out_dt, packed.data(), n, block).ok());
          ASSERT_TRUE(DequantizeInt8Blocks(gpu_, gout.get(), out_dt, gpacked.get(), n, block).ok());
          Sync();
          const int64_t oat = FirstDifference(gout.Bytes(), BytesOf(out));
          EXPECT_EQ(oat, -1) << DTypeName(out_dt) << " output byte " << oat;
        }
        const std::vector<double> init = rng_.Uniform(n, -1, 1);
        std::vector<float> acc(init.begin(), init.end());
        DeviceArray gacc(acc);
        ASSERT_TRUE(DequantizeInt8BlocksAccumulate(cpu_, acc.data(), packed.data(), n, block).ok());
        ASSERT_TRUE(DequantizeInt8BlocksAccumulate(gpu_, gacc.as<float>(), gpacked.get(), n, block).ok());
        Sync();
        const int64_t aat = FirstDifference(gacc.Bytes(), BytesOf(acc));
        EXPECT_EQ(aat, -1) << "acc byte " << aat;
      }
    }
  }
}

// kReject on the GPU: the CPU's status (the first non-finite element, its
// value and block) and the residual untouched.
TEST_P(QuantizeGpuTest, RejectsLikeCpu) {
  const DType dt = GetParam();
  const Shape s{4096, 1024};
  std::vector<double> values = Inputs(rng_, s, false);
  values[2100] = std::numeric_limits<double>::infinity();
  values[1500] = std::numeric_limits<double>::quiet_NaN();
  values[3000] = -std::numeric_limits<double>::infinity();
  HostTensor x = HostTensor::From(dt, values);
  std::vector<float> residual(s.n, 0.25f);
  std::vector<uint32_t> packed(Int8PackedBytes(s.n, s.block) / 4);
  DeviceArray gx(x), gresidual(residual), gpacked(packed);
  const absl::Status want =
      QuantizeInt8Blocks(cpu_, packed.data(), x.data(), dt, s.n, s.block, NonFiniteInput::kReject, residual.data());
  const absl::Status got = QuantizeInt8Blocks(gpu_, gpacked.get(), gx.get(), dt, s.n, s.block, NonFiniteInput::kReject,
                                              gresidual.as<float>());
  EXPECT_EQ(want.message(), "quantize: element 1500 of 4096 is nan (block 1); int8 quantization needs finite values");
  EXPECT_EQ(got.code(), want.code());
  EXPECT_EQ(got.message(), want.message());
  Sync();
  EXPECT_EQ(gresidual.Bytes(), BytesOf(std::vector<float>(s.n, 0.25f)));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QuantizeGpuTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

#endif  // ZEROSHARD_HAS_CUDA

}  // namespace
}  // namespace zeroshard::kernels

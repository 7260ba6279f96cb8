#include "kernels/cpu/vector_isa.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/testing/test_seed.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cross_entropy_cpu.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/cpu/layernorm_cpu.h"
#include "kernels/cpu/lion_cpu.h"
#include "kernels/cpu/optimizer_cpu.h"
#include "kernels/cpu/vocab_parallel_cpu.h"
#include "kernels/float_types.h"

namespace zeroshard::kernels::cpu {
namespace {

// Not a multiple of any vector width, so every loop runs its tail too.
constexpr int64_t kN = 4099;

// Normal values at several scales, then the values that take the loops'
// other paths: signed zeros, infinities, NaN, subnormals, the limits of
// ExpF32's range and of f16.
std::vector<float> Inputs(int64_t n, float scale) {
  std::mt19937 rng(static_cast<uint32_t>(TestSeed(SeedLog::kQuiet)));
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  const float special[] = {0.0f,      -0.0f,     INFINITY,   -INFINITY, NAN,       1e-40f,   -1e-40f,
                           1e-45f,    1e30f,     -1e30f,     87.336f,   -87.336f,  88.7228f, -88.7228f,
                           43.7f,     -43.7f,    65504.0f,   65520.0f,  -65520.0f, 6e-8f,    3e-5f,
                           3.4e38f,   -3.4e38f,  std::numeric_limits<float>::min()};
  for (size_t i = 0; i < sizeof special / sizeof special[0] && 3 * i < static_cast<size_t>(n); ++i) {
    x[3 * i] = special[i];
  }
  return x;
}

template <typename T>
std::vector<T> Stored(const std::vector<float>& x) {
  std::vector<T> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = Store<T>(x[i]);
  return out;
}

// The bytes of the vectors, one after the other.
template <typename... Vs>
std::vector<uint8_t> Bytes(const Vs&... vs) {
  std::vector<uint8_t> b;
  auto append = [&b](const auto& v) {
    const auto* first = reinterpret_cast<const uint8_t*>(v.data());
    b.insert(b.end(), first, first + v.size() * sizeof(v[0]));
  };
  (append(vs), ...);
  return b;
}

// Index of the first differing element of size `elem`, for the message.
int64_t FirstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t elem) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i / elem);
  }
  return -1;
}

class VectorIsaTest : public testing::TestWithParam<VectorIsa> {
 protected:
  void SetUp() override {
    if (!CpuSupports(GetParam())) {
      GTEST_SKIP() << "this CPU lacks " << VectorIsaName(GetParam()) << " (it runs up to "
                   << VectorIsaName(BestVectorIsa()) << "): nothing to compare at that ISA";
    }
  }

  // Runs `kernel` (which returns its outputs' bytes) at the baseline and at
  // the ISA under test and expects the same bytes.
  template <typename Kernel>
  void ExpectSameBits(const std::string& what, size_t elem, Kernel kernel) {
    std::vector<uint8_t> baseline, vector;
    {
      ScopedVectorIsa at(VectorIsa::kBaseline);
      baseline = kernel();
    }
    {
      ScopedVectorIsa at(GetParam());
      ASSERT_EQ(ActiveVectorIsa(), GetParam());
      vector = kernel();
    }
    ASSERT_EQ(baseline.size(), vector.size()) << what;
    EXPECT_TRUE(baseline == vector) << what << " at " << VectorIsaName(GetParam())
                                    << " differs from the baseline first at element "
                                    << FirstDifference(baseline, vector, elem);
  }
};

TEST_P(VectorIsaTest, GeluForwardAndBackward) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::vector<float> x = Inputs(kN, 3.0f), dy = Inputs(kN, 1.0f);
    DispatchFloatDType(dtype, "test", [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> xs = Stored<T>(x), dys = Stored<T>(dy);
      ExpectSameBits(std::string("GeluForward ") + DTypeName(dtype), sizeof(T), [&] {
        std::vector<T> y(kN);
        EXPECT_TRUE(GeluForward(1, y.data(), xs.data(), kN, dtype).ok());
        return Bytes(y);
      });
      ExpectSameBits(std::string("GeluBackward ") + DTypeName(dtype), sizeof(T), [&] {
        std::vector<T> dx(kN);
        EXPECT_TRUE(GeluBackward(1, dx.data(), xs.data(), dys.data(), kN, dtype).ok());
        return Bytes(dx);
      });
      ExpectSameBits(std::string("ResidualForward ") + DTypeName(dtype), sizeof(T), [&] {
        std::vector<T> y(kN);
        EXPECT_TRUE(ResidualForward(1, y.data(), xs.data(), dys.data(), kN, dtype).ok());
        return Bytes(y);
      });
      ExpectSameBits(std::string("AccumulateInto from ") + DTypeName(dtype), sizeof(float), [&] {
        std::vector<float> acc = dy;
        EXPECT_TRUE(AccumulateInto(1, acc.data(), xs.data(), dtype, kN).ok());
        return Bytes(acc);
      });
      return absl::OkStatus();
    }).IgnoreError();
  }
}

TEST_P(VectorIsaTest, CastBetweenEveryPair) {
  const std::vector<float> x = Inputs(kN, 1000.0f);
  for (DType in : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
      if (in == out) continue;
      std::vector<uint8_t> src(kN * DTypeSize(in));
      ASSERT_TRUE(Cast(1, src.data(), in, x.data(), DType::kF32, kN).ok());
      ExpectSameBits(std::string("Cast ") + DTypeName(in) + " to " + DTypeName(out), DTypeSize(out), [&] {
        std::vector<uint8_t> dst(kN * DTypeSize(out));
        EXPECT_TRUE(Cast(1, dst.data(), out, src.data(), in, kN).ok());
        return dst;
      });
    }
  }
}

TEST_P(VectorIsaTest, CrossEntropyForwardAndBackward) {
  constexpr int64_t kRows = 5, kVocab = 1031;  // vocab: not a multiple of the 8 lanes or of a block
  const std::vector<float> logits = Inputs(kRows * kVocab, 4.0f);
  // Finite logits for the loss (a NaN row is covered by the gradient below).
  std::vector<float> finite = logits;
  for (float& v : finite) v = std::isfinite(v) ? std::fmax(-60.0f, std::fmin(60.0f, v)) : 1.5f;
  const std::vector<int32_t> targets = {3, -1, 1030, 0, 517};
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    DispatchFloatDType(dtype, "test", [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> z = Stored<T>(finite), z_special = Stored<T>(logits);
      ExpectSameBits(std::string("CrossEntropyForward ") + DTypeName(dtype), sizeof(float), [&] {
        std::vector<float> out(2 * kRows + 2);
        EXPECT_TRUE(CrossEntropyForward(1, out.data(), out.data() + kRows, out.data() + 2 * kRows, z.data(),
                                        targets.data(), kRows, kVocab, dtype)
                        .ok());
        return Bytes(out);
      });
      std::vector<float> lse(kRows);
      for (int64_t r = 0; r < kRows; ++r) lse[r] = 2.0f + 0.5f * static_cast<float>(r);
      ExpectSameBits(std::string("CrossEntropyBackward ") + DTypeName(dtype), sizeof(T), [&] {
        std::vector<T> dz(kRows * kVocab);
        EXPECT_TRUE(CrossEntropyBackward(1, dz.data(), z_special.data(), lse.data(), targets.data(), 0.125f, kRows,
                                         kVocab, dtype)
                        .ok());
        return Bytes(dz);
      });
      return absl::OkStatus();
    }).IgnoreError();
  }
}

TEST_P(VectorIsaTest, VocabParallelSumExpAndBackward) {
  // One tp rank's block: columns [0, valid) are vocabulary entries begin.., the rest padding.
  constexpr int64_t kRows = 4, kLocal = 523, kValid = 517, kBegin = 1000;
  std::vector<float> logits = Inputs(kRows * kLocal, 4.0f);
  for (float& v : logits) v = std::isfinite(v) ? std::fmax(-60.0f, std::fmin(60.0f, v)) : -2.5f;
  const std::vector<int32_t> targets = {1003, -1, 7, 1516};  // here, ignored, another rank's, the last valid
  std::vector<float> row_max(kRows);
  for (int64_t r = 0; r < kRows; ++r) row_max[r] = 10.0f + static_cast<float>(r);
  std::vector<float> lse(kRows);
  for (int64_t r = 0; r < kRows; ++r) lse[r] = 3.0f + 0.25f * static_cast<float>(r);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    DispatchFloatDType(dtype, "test", [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> z = Stored<T>(logits);
      ExpectSameBits(std::string("VocabParallelSumExpAndTarget ") + DTypeName(dtype), sizeof(float), [&] {
        std::vector<float> sums(2 * kRows);
        EXPECT_TRUE(VocabParallelSumExpAndTarget(1, sums.data(), z.data(), row_max.data(), targets.data(), kRows,
                                                 kBegin, kLocal, kValid, dtype)
                        .ok());
        return Bytes(sums);
      });
      ExpectSameBits(std::string("VocabParallelCrossEntropyBackward ") + DTypeName(dtype), sizeof(T), [&] {
        std::vector<T> dz(kRows * kLocal, Store<T>(7.0f));
        EXPECT_TRUE(VocabParallelCrossEntropyBackward(1, dz.data(), z.data(), lse.data(), targets.data(), 0.5f, kRows,
                                                      kBegin, kLocal, kValid, dtype)
                        .ok());
        return Bytes(dz);
      });
      return absl::OkStatus();
    }).IgnoreError();
  }
}

TEST_P(VectorIsaTest, LayerNormForwardAndBackward) {
  constexpr int64_t kRows = 6, kC = 203;  // channels: not a multiple of a vector
  std::vector<float> x = Inputs(kRows * kC, 2.0f), dy = Inputs(kRows * kC, 1.0f);
  for (std::vector<float>* v : {&x, &dy}) {  // finite rows: one NaN would make every row statistic NaN
    for (float& e : *v) e = std::isfinite(e) ? std::fmax(-1e3f, std::fmin(1e3f, e)) : 0.5f;
  }
  const std::vector<float> w = Inputs(kC, 1.0f), bias = Inputs(kC, 0.1f);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    DispatchFloatDType(dtype, "test", [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> xs = Stored<T>(x), dys = Stored<T>(dy), ws = Stored<T>(w), bs = Stored<T>(bias);
      std::vector<float> mean(kRows), rstd(kRows);
      ExpectSameBits(std::string("LayerNormForward ") + DTypeName(dtype), sizeof(T), [&] {
        std::vector<T> y(kRows * kC);
        EXPECT_TRUE(
            LayerNormForward(1, y.data(), mean.data(), rstd.data(), xs.data(), ws.data(), bs.data(), kRows, kC, 1e-5f,
                             dtype)
                .ok());
        return Bytes(y, mean, rstd);
      });
      ExpectSameBits(std::string("LayerNormBackward ") + DTypeName(dtype), sizeof(T), [&] {
        std::vector<T> dx(kRows * kC), dw = Stored<T>(w), db = Stored<T>(bias);  // dw, db accumulate
        EXPECT_TRUE(LayerNormBackward(1, dx.data(), dw.data(), db.data(), dys.data(), xs.data(), ws.data(),
                                      mean.data(), rstd.data(), kRows, kC, dtype)
                        .ok());
        return Bytes(dx, dw, db);
      });
      return absl::OkStatus();
    }).IgnoreError();
  }
}

TEST_P(VectorIsaTest, AdamWBothLerpFormsAndLion) {
  const std::vector<float> p0 = Inputs(kN, 0.1f), g = Inputs(kN, 1e-2f), m0 = Inputs(kN, 1e-3f);
  std::vector<float> v0(kN);
  for (int64_t i = 0; i < kN; ++i) v0[i] = std::fabs(m0[i]) * 1e-3f;
  for (float one_minus_beta1 : {0.1f, 0.75f}) {
    const AdamWScalars s{0.9999f, one_minus_beta1, 0.999f, 0.001f, 3e-4f, 0.0447f, 1e-8f};
    ExpectSameBits("AdamWUpdate, 1 - beta1 = " + std::to_string(one_minus_beta1), sizeof(float), [&] {
      std::vector<float> p = p0, m = m0, v = v0;
      AdamWUpdate(1, p.data(), g.data(), m.data(), v.data(), kN, s);
      return Bytes(p, m, v);
    });
  }
  const LionScalars lion{1e-4f, 0.9f, 0.1f, 0.99f, 0.01f, 0.1f};
  ExpectSameBits("LionUpdate", sizeof(float), [&] {
    std::vector<float> p = p0, m = m0;
    LionUpdate(1, p.data(), g.data(), m.data(), kN, lion);
    return Bytes(p, m);
  });
}

INSTANTIATE_TEST_SUITE_P(EachWiderIsa, VectorIsaTest, testing::Values(VectorIsa::kAvx2, VectorIsa::kAvx512),
                         [](const testing::TestParamInfo<VectorIsa>& info) {
                           return std::string(VectorIsaName(info.param));
                         });

TEST(VectorIsa, NamesOrderAndSupport) {
  EXPECT_STREQ(VectorIsaName(VectorIsa::kBaseline), "baseline");
  EXPECT_STREQ(VectorIsaName(VectorIsa::kAvx2), "avx2");
  EXPECT_STREQ(VectorIsaName(VectorIsa::kAvx512), "avx512");
  EXPECT_TRUE(CpuSupports(VectorIsa::kBaseline));
  EXPECT_TRUE(CpuSupports(BestVectorIsa()));
  // AVX-512 here includes AVX2's instructions.
  if (CpuSupports(VectorIsa::kAvx512)) {
    EXPECT_TRUE(CpuSupports(VectorIsa::kAvx2));
  }
}

TEST(VectorIsa, EnvironmentNamesTheIsaOrFails) {
  ASSERT_EQ(setenv(kVectorIsaEnv, "baseline", 1), 0);
  absl::StatusOr<VectorIsa> isa = VectorIsaFromEnvironment();
  ASSERT_TRUE(isa.ok()) << isa.status();
  EXPECT_EQ(*isa, VectorIsa::kBaseline);

  ASSERT_EQ(setenv(kVectorIsaEnv, "sse9", 1), 0);
  isa = VectorIsaFromEnvironment();
  EXPECT_EQ(isa.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(isa.status().message(),
            "ZEROSHARD_CPU_ISA=sse9: expected one of baseline, avx2, avx512 (or unset for the widest)");

  ASSERT_EQ(unsetenv(kVectorIsaEnv), 0);
  isa = VectorIsaFromEnvironment();
  ASSERT_TRUE(isa.ok());
  EXPECT_EQ(*isa, BestVectorIsa());
}

TEST(VectorIsa, SetAndScopedRestore) {
  const VectorIsa before = ActiveVectorIsa();
  {
    ScopedVectorIsa at(VectorIsa::kBaseline);
    EXPECT_EQ(ActiveVectorIsa(), VectorIsa::kBaseline);
  }
  EXPECT_EQ(ActiveVectorIsa(), before);
  ASSERT_TRUE(SetActiveVectorIsa(BestVectorIsa()).ok());
  EXPECT_EQ(ActiveVectorIsa(), BestVectorIsa());
  if (!CpuSupports(VectorIsa::kAvx512)) {
    const absl::Status s = SetActiveVectorIsa(VectorIsa::kAvx512);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), std::string("vector ISA avx512: this CPU lacks avx512; it runs up to ") +
                               VectorIsaName(BestVectorIsa()));
  }
}

}  // namespace
}  // namespace zeroshard::kernels::cpu

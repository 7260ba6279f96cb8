#include "models/gpt2/gpt2.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "kernels/context.h"
#include "kernels/cpu/vector_isa.h"
#include "nn/resident_model.h"
#include "models/gpt2/testing/gpt2_reference.h"
#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

// The mean loss the last unit's terms describe.
double Mean(const LossTerms& t) { return t.loss.sum / t.loss.weight; }

using testing::ExpectAllClose;
using testing::HostView;

TEST(Gpt2Test, HuggingFaceNamesShapesAndInit) {
  const Gpt2Config cfg{2, 2, 16, 64, 8};
  auto model = BuildGpt2(cfg);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& units = (*model)->units;
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[0]->name(), "embed");
  EXPECT_EQ(units[1]->name(), "h.0");
  EXPECT_EQ(units[2]->name(), "h.1");
  EXPECT_EQ(units[3]->name(), "head");
  EXPECT_EQ(units[3]->borrowed_params(), std::vector<std::string>{"wte.weight"});
  std::vector<std::string> names;
  for (const auto& p : units[1]->params()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.weight",
                                             "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias",
                                             "h.0.ln_2.weight", "h.0.ln_2.bias", "h.0.mlp.c_fc.weight",
                                             "h.0.mlp.c_fc.bias", "h.0.mlp.c_proj.weight", "h.0.mlp.c_proj.bias"}));
  auto shape = [&](const std::string& name) {
    auto loc = (*model)->FindParam(name).value();
    return units[loc.unit]->params()[loc.param].shape;
  };
  EXPECT_EQ(shape("wte.weight"), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(shape("wpe.weight"), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(shape("h.1.attn.c_attn.weight"), (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(shape("h.1.attn.c_attn.bias"), (std::vector<int64_t>{48}));
  EXPECT_EQ(shape("h.1.mlp.c_fc.weight"), (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(shape("h.1.mlp.c_proj.weight"), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(shape("ln_f.bias"), (std::vector<int64_t>{16}));
  auto spec = [&](const std::string& name) {
    auto loc = (*model)->FindParam(name).value();
    return units[loc.unit]->params()[loc.param];
  };
  EXPECT_EQ(spec("h.0.ln_2.weight").init, InitKind::kOnes);
  EXPECT_EQ(spec("h.0.ln_2.bias").init, InitKind::kZeros);
  EXPECT_EQ(spec("h.0.mlp.c_fc.bias").init, InitKind::kZeros);
  EXPECT_EQ(spec("wpe.weight").init_std, 0.02f);
  EXPECT_EQ(spec("h.0.attn.c_attn.weight").init_std, 0.02f);
  EXPECT_FLOAT_EQ(spec("h.0.attn.c_proj.weight").init_std, 0.01f);  // 0.02 / sqrt(2 * 2)
  EXPECT_FLOAT_EQ(spec("h.1.mlp.c_proj.weight").init_std, 0.01f);
  EXPECT_EQ((*model)->FindParam("h.2.ln_1.weight").status().code(), absl::StatusCode::kNotFound);
}

TEST(Gpt2Test, Gpt2SmallHas124439808Parameters) {
  auto model = BuildGpt2(Gpt2Config{12, 12, 768, 50257, 1024});
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->num_params(), 124439808);  // Hugging Face's count, wte counted once
}

TEST(Gpt2Test, InvalidConfigsNameTheField) {
  auto m = BuildGpt2(Gpt2Config{2, 3, 16, 64, 8});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "gpt2 n_embd 16 is not a multiple of n_head 3");
  m = BuildGpt2(Gpt2Config{0, 2, 16, 64, 8});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "gpt2 n_layer is 0, expected >= 1");
}

class Gpt2GradientTest : public ::testing::Test {
 protected:
  // T = 6 < seq_len = 8: wpe rows 6 and 7 must get exactly zero gradient.
  static constexpr int64_t kB = 2, kT = 6;
  const Gpt2Config cfg_{2, 2, 16, 64, 8};

  void SetUp() override {
    model_ = BuildGpt2(cfg_).value();
    ctx_.tracker = &tracker_;
    rm_ = std::make_unique<ResidentModel>(ResidentModel::Create(model_.get(), ctx_).value());
    // Random parameters well away from the init's symmetric point, so every
    // path (LayerNorm affine, biases, attention) carries signal.
    for (const auto& unit : model_->units) {
      for (const ParamSpec& spec : unit->params()) {
        const bool is_ln_weight = spec.init == InitKind::kOnes;
        const float stddev = spec.name == "wte.weight" ? 0.5f : spec.shape.size() == 1 ? 0.2f : 0.3f;
        auto values = testing::RandomFloats(rng_, spec.numel(), stddev, is_ln_weight ? 1.0f : 0.0f);
        TensorView v = rm_->param(model_->FindParam(spec.name).value());
        std::memcpy(v.data, values.data(), values.size() * sizeof(float));
        ref_params_[spec.name] = testing::ToDouble(values);
      }
    }
    tokens_.resize(kB * kT);
    targets_.resize(kB * kT);
    for (auto& t : tokens_) t = static_cast<int32_t>(rng_() % cfg_.vocab_size);
    for (auto& t : targets_) t = static_cast<int32_t>(rng_() % cfg_.vocab_size);
  }

  zeroshard::Batch MakeBatch() { return Gpt2Batch(HostView(tokens_, {kB, kT}), HostView(targets_, {kB, kT})); }

  // A fresh seed per test, traced in every failure message of the test.
  const uint32_t seed_ = testing::TestSeed();
  const ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, ::testing::Message() << "seed " << seed_};
  std::mt19937 rng_{seed_};
  MemoryTracker tracker_;
  ComputeContext ctx_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ResidentModel> rm_;
  testing::ParamMap ref_params_;
  std::vector<int32_t> tokens_, targets_;
};

// The whole model against an f64 reference: the loss, and the gradient of
// every element of every parameter against central finite differences
// (B=2, T=6 of a position table of 8, L=2, NH=2, C=16, V=64).
// Tolerance |g - fd| <= 1e-5 + 1e-3 |fd| (f32 backward vs exact f64).
TEST_F(Gpt2GradientTest, EveryParameterGradientMatchesF64FiniteDifferences) {
  testing::Gpt2Reference ref(cfg_);
  const double ref_loss = ref.Loss(ref_params_, tokens_, targets_, kB, kT);
  auto loss = rm_->ForwardBackward(MakeBatch(), 1.0f / (kB * kT));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(Mean(*loss), ref_loss, 1e-5 * std::fabs(ref_loss));

  int checked = 0;
  for (const auto& unit : model_->units) {
    for (const ParamSpec& spec : unit->params()) {
      const TensorView g = rm_->grad(model_->FindParam(spec.name).value());
      std::vector<float> actual(g.as<float>(), g.as<float>() + g.numel());
      testing::ParamMap p = ref_params_;
      const auto numeric = testing::NumericalGradient(
          [&](const std::vector<double>& x) {
            p[spec.name] = x;
            return ref.Loss(p, tokens_, targets_, kB, kT);
          },
          ref_params_[spec.name], 1e-6);
      ExpectAllClose(actual, numeric, 1e-5, 1e-3, spec.name);
      double norm = 0;
      for (double x : numeric) norm += x * x;
      EXPECT_GT(norm, 0.0) << spec.name << " has an all-zero gradient; the check would be vacuous";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 + 12 * 2 + 2);
  const TensorView dwpe = rm_->grad(model_->FindParam("wpe.weight").value());
  for (int64_t i = kT * cfg_.n_embd; i < dwpe.numel(); ++i) ASSERT_EQ(dwpe.as<float>()[i], 0.0f) << i;
}

TEST_F(Gpt2GradientTest, GradientsAccumulateAcrossCallsAndScaleWithDloss) {
  ASSERT_TRUE(rm_->ForwardBackward(MakeBatch(), 1.0f / (kB * kT)).ok());
  std::vector<std::vector<float>> once;
  for (int u = 0; u < rm_->num_units(); ++u) {
    once.emplace_back(rm_->unit_grads(u).as<float>(), rm_->unit_grads(u).as<float>() + rm_->unit_grads(u).numel());
  }
  ASSERT_TRUE(rm_->ForwardBackward(MakeBatch(), 2.0f / (kB * kT)).ok());
  for (int u = 0; u < rm_->num_units(); ++u) {
    const float* g = rm_->unit_grads(u).as<float>();
    for (size_t i = 0; i < once[u].size(); ++i) {
      ASSERT_NEAR(g[i], 3.0f * once[u][i], 1e-5f + 1e-5f * std::fabs(once[u][i])) << "unit " << u << " elem " << i;
    }
  }
  ASSERT_TRUE(rm_->ZeroGrads().ok());
  for (int u = 0; u < rm_->num_units(); ++u) {
    for (int64_t i = 0; i < rm_->unit_grads(u).numel(); ++i) ASSERT_EQ(rm_->unit_grads(u).as<float>()[i], 0.0f);
  }
}

// Activation checkpointing re-runs Forward: it must rebuild bitwise the same
// output, and Backward from either copy must give identical gradients.
TEST_F(Gpt2GradientTest, ForwardIsBitwiseRepeatable) {
  auto first = rm_->ForwardBackward(MakeBatch(), 1.0f / (kB * kT));
  ASSERT_TRUE(first.ok());
  std::vector<std::vector<float>> grads;
  for (int u = 0; u < rm_->num_units(); ++u) {
    grads.emplace_back(rm_->unit_grads(u).as<float>(), rm_->unit_grads(u).as<float>() + rm_->unit_grads(u).numel());
  }
  ASSERT_TRUE(rm_->ZeroGrads().ok());
  auto second = rm_->ForwardBackward(MakeBatch(), 1.0f / (kB * kT));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(std::memcmp(&first->loss.sum, &second->loss.sum, sizeof(double)), 0);
  EXPECT_EQ(first->loss.weight, kB * kT);
  for (int u = 0; u < rm_->num_units(); ++u) {
    EXPECT_EQ(std::memcmp(grads[u].data(), rm_->unit_grads(u).data(), grads[u].size() * sizeof(float)), 0) << u;
  }
}

TEST_F(Gpt2GradientTest, ActivationsAreTrackedAndReleased) {
  ASSERT_TRUE(rm_->ForwardBackward(MakeBatch(), 1.0f / (kB * kT)).ok());
  EXPECT_GT(tracker_.Usage(MemoryCategory::kActivations).peak, 0);
  EXPECT_EQ(tracker_.Usage(MemoryCategory::kActivations).current, 0);
  EXPECT_EQ(tracker_.Usage(MemoryCategory::kWorkspace).current, 0);
  EXPECT_EQ(tracker_.Usage(MemoryCategory::kParams).current, model_->num_params() * 4);
}

// Saved activations are self-contained: poisoning every unit's input and
// output after Forward changes no gradient bit.
TEST_F(Gpt2GradientTest, BackwardReadsNeitherForwardInputNorOutput) {
  ASSERT_TRUE(rm_->ForwardBackward(MakeBatch(), 1.0f / (kB * kT)).ok());
  std::vector<float> reference = rm_->CopyGradsToHost().value();
  ASSERT_TRUE(rm_->ZeroGrads().ok());

  const zeroshard::Batch batch = MakeBatch();
  const int n = static_cast<int>(model_->units.size());
  std::vector<std::unique_ptr<SavedActivations>> saved(n);
  std::vector<UnitOutput> outs(n);
  auto views = [&](int u, bool grads) {
    std::vector<TensorView> v;
    for (int i = 0; i < static_cast<int>(model_->units[u]->params().size()); ++i) {
      v.push_back(grads ? rm_->grad({u, i}) : rm_->param({u, i}));
    }
    for (const std::string& b : model_->units[u]->borrowed_params()) {
      auto loc = model_->FindParam(b).value();
      v.push_back(grads ? rm_->grad(loc) : rm_->param(loc));
    }
    return v;
  };
  auto poison = [](ActivationPack& pack) {
    for (int i = 0; i < pack.size(); ++i) {
      Buffer& b = pack.buffer(i);
      for (int64_t j = 0; j < b.numel(); ++j) b.as<float>()[j] = std::numeric_limits<float>::quiet_NaN();
    }
  };
  UnitContext uctx;
  uctx.compute = ctx_;
  for (int u = 0; u < n; ++u) {
    std::vector<TensorView> in;
    if (u > 0) in = outs[u - 1].activations.views();
    ASSERT_TRUE(model_->units[u]->Forward(uctx, views(u, false), batch, in, &outs[u], &saved[u]).ok());
    if (u > 0) poison(outs[u - 1].activations);
  }
  float seed = 1.0f / (kB * kT);
  TensorView seed_view{&seed, DType::kF32, {1}, Device::kCpu};
  ActivationPack grad;
  for (int u = n - 1; u >= 0; --u) {
    ActivationPack grad_in;
    std::vector<TensorView> grad_out = u == n - 1 ? std::vector<TensorView>{seed_view} : grad.views();
    ASSERT_TRUE(
        model_->units[u]->Backward(uctx, views(u, false), views(u, true), batch, *saved[u], grad_out, &grad_in).ok());
    grad = std::move(grad_in);
  }
  EXPECT_TRUE(grad.empty());  // the first unit writes no input gradient
  const std::vector<float> got = rm_->CopyGradsToHost().value();
  ASSERT_EQ(got.size(), reference.size());
  EXPECT_EQ(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)), 0);
}

TEST_F(Gpt2GradientTest, WrongParameterCountIsInvalidArgument) {
  UnitOutput out;
  std::unique_ptr<SavedActivations> saved;
  std::vector<TensorView> too_few = {rm_->param({3, 0}), rm_->param({3, 1})};
  Buffer x = Buffer::AllocateZeroed(nullptr, MemoryCategory::kActivations, Device::kCpu, DType::kF32, kB * kT * 16).value();
  UnitContext uctx;
  uctx.compute = ctx_;
  const std::vector<TensorView> in = {ViewOf(x, {kB, kT, 16})};
  absl::Status s = model_->units[3]->Forward(uctx, too_few, MakeBatch(), in, &out, &saved);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "head: got 2 parameter (ln_f.weight, ln_f.bias, wte.weight) views, expected 3");
}

// Runs one forward/backward of a model large enough that the kernels split
// their loops across threads once per setting (each configures the kernels
// before its run) and expects the same loss and gradients bitwise.
void ExpectBitwiseAcrossSettings(const std::vector<std::pair<std::string, std::function<void()>>>& settings) {
  const Gpt2Config cfg{1, 4, 64, 512, 32};
  const int64_t b = 4, t = 32;
  auto model = BuildGpt2(cfg).value();
  ComputeContext ctx;
  auto rm = ResidentModel::Create(model.get(), ctx).value();
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  ASSERT_TRUE(rm.InitParams(seed).ok());
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(b * t), targets(b * t);
  for (auto& x : tokens) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  for (auto& x : targets) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  const Batch batch = Gpt2Batch(HostView(tokens, {b, t}), HostView(targets, {b, t}));
  std::vector<std::vector<float>> grads;
  std::vector<float> losses;
  for (const auto& [name, configure] : settings) {
    configure();
    ASSERT_TRUE(rm.ZeroGrads().ok());
    auto loss = rm.ForwardBackward(batch, 1.0f / (b * t));
    ASSERT_TRUE(loss.ok()) << name << ": " << loss.status();
    losses.push_back(Mean(*loss));
    grads.push_back(rm.CopyGradsToHost().value());
  }
  for (size_t i = 1; i < grads.size(); ++i) {
    EXPECT_EQ(std::memcmp(&losses[0], &losses[i], sizeof(float)), 0) << settings[i].first << " vs " << settings[0].first;
    EXPECT_EQ(std::memcmp(grads[0].data(), grads[i].data(), grads[0].size() * sizeof(float)), 0)
        << settings[i].first << " vs " << settings[0].first;
  }
}

// The engine's bitwise-repeatability contract holds whatever the CPU thread
// count (ranks on one host may run with different counts).
TEST(Gpt2ThreadsTest, GradientsAreBitwiseIndependentOfThreadCount) {
  const int saved_threads = kernels::CpuThreads();
  std::vector<std::pair<std::string, std::function<void()>>> settings;
  for (int threads : {1, 2, 3}) {
    settings.emplace_back(std::to_string(threads) + " threads", [threads] { kernels::SetCpuThreads(threads); });
  }
  ExpectBitwiseAcrossSettings(settings);
  kernels::SetCpuThreads(saved_threads);
}

// ... and whatever vector ISA the element-wise loops run at (hosts of one job
// may have different CPUs).
TEST(Gpt2ThreadsTest, GradientsAreBitwiseIndependentOfVectorIsa) {
  using kernels::cpu::VectorIsa;
  const kernels::cpu::ScopedVectorIsa restore(kernels::cpu::ActiveVectorIsa());
  std::vector<std::pair<std::string, std::function<void()>>> settings;
  for (VectorIsa isa : kernels::cpu::kVectorIsas) {
    if (!kernels::cpu::CpuSupports(isa)) continue;
    settings.emplace_back(kernels::cpu::VectorIsaName(isa),
                          [isa] { ASSERT_TRUE(kernels::cpu::SetActiveVectorIsa(isa).ok()); });
  }
  if (settings.size() < 2) GTEST_SKIP() << "this CPU runs only the baseline ISA: nothing to compare";
  ExpectBitwiseAcrossSettings(settings);
}

TEST(Gpt2InitTest, InitialLossIsNearLnVocab) {
  const Gpt2Config cfg{2, 2, 32, 128, 16};
  auto model = BuildGpt2(cfg).value();
  ComputeContext ctx;
  auto rm = ResidentModel::Create(model.get(), ctx).value();
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  ASSERT_TRUE(rm.InitParams(seed).ok());
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(4 * 16), targets(4 * 16);
  for (auto& t : tokens) t = rng() % 128;
  for (auto& t : targets) t = rng() % 128;
  auto loss = rm.Forward(Gpt2Batch(HostView(tokens, {4, 16}), HostView(targets, {4, 16})));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(Mean(*loss), std::log(128.0), 0.05);  // std 0.02 init: nearly uniform predictions
}

}  // namespace
}  // namespace zeroshard

namespace zeroshard {
namespace {

// bf16 / f16 compute (values stored in the 16-bit type, f32 accumulation)
// against f32 on the same parameters and batch. Tolerances reflect one
// 16-bit rounding per stored activation: loss relative error, and per-tensor
// relative L2 error of each gradient. Observed: bf16 loss ~2e-4, gradients
// <= 1.3e-2; f16 loss ~2e-5, gradients <= 1.3e-3 (unit roundoff 2^-9, 2^-12).
struct PrecisionCase {
  DType dtype;
  double loss_rtol;
  double grad_rel_l2;
};

class Gpt2MixedPrecisionTest : public ::testing::TestWithParam<PrecisionCase> {};

TEST_P(Gpt2MixedPrecisionTest, LossAndGradientsTrackF32) {
  const PrecisionCase pc = GetParam();
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << DTypeName(pc.dtype) << " seed " << seed);
  const Gpt2Config cfg{2, 4, 32, 96, 16};
  const int64_t b = 2, t = 16;
  auto model = BuildGpt2(cfg).value();
  ComputeContext f32_ctx, low_ctx;
  low_ctx.compute_dtype = pc.dtype;
  auto ref = ResidentModel::Create(model.get(), f32_ctx).value();
  auto low = ResidentModel::Create(model.get(), low_ctx).value();
  std::mt19937 rng(seed);
  // Parameters representable in the 16-bit type, so both runs see the same model.
  ASSERT_TRUE(low.InitParams(seed).ok());
  auto params = low.CopyParamsToHost().value();
  // Weights std 0.1 (5x GPT-2's init) so attention and the MLP carry signal;
  // LayerNorm stays at 1/0 and logits stay O(1), as in a trained model.
  // (Logits of O(10) stored in bf16 lose ~0.05 absolute, which alone moves
  // softmax probabilities by ~5%.)
  {
    size_t offset = 0;
    for (const auto& unit : model->units) {
      for (const ParamSpec& spec : unit->params()) {
        if (spec.init == InitKind::kNormal) {
          for (int64_t i = 0; i < spec.numel(); ++i) params[offset + i] *= 5.0f;
        }
        offset += spec.numel();
      }
    }
  }
  ASSERT_TRUE(low.SetParamsFromHost(params).ok());
  params = low.CopyParamsToHost().value();
  ASSERT_TRUE(ref.SetParamsFromHost(params).ok());
  std::vector<int32_t> tokens(b * t), targets(b * t);
  for (auto& x : tokens) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  for (auto& x : targets) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  const Batch batch = Gpt2Batch(HostView(tokens, {b, t}), HostView(targets, {b, t}));
  auto ref_loss = ref.ForwardBackward(batch, 1.0f / (b * t));
  auto low_loss = low.ForwardBackward(batch, 1.0f / (b * t));
  ASSERT_TRUE(ref_loss.ok()) << ref_loss.status();
  ASSERT_TRUE(low_loss.ok()) << low_loss.status();
  EXPECT_NEAR(Mean(*low_loss), Mean(*ref_loss), pc.loss_rtol * Mean(*ref_loss));
  const auto g32 = ref.CopyGradsToHost().value();
  const auto g16 = low.CopyGradsToHost().value();
  size_t offset = 0;
  double worst = 0;
  for (const auto& unit : model->units) {
    for (const ParamSpec& spec : unit->params()) {
      double diff = 0, norm = 0;
      for (int64_t i = 0; i < spec.numel(); ++i) {
        const double a = g32[offset + i], d = g16[offset + i] - a;
        diff += d * d;
        norm += a * a;
      }
      EXPECT_GT(norm, 0.0) << spec.name;
      EXPECT_LT(std::sqrt(diff / norm), pc.grad_rel_l2) << spec.name;
      worst = std::max(worst, std::sqrt(diff / norm));
      offset += spec.numel();
    }
  }
  EXPECT_EQ(offset, g32.size());
  std::printf("%s: loss %.5f vs f32 %.5f, worst per-tensor relative L2 gradient error %.4f\n", DTypeName(pc.dtype),
              Mean(*low_loss), Mean(*ref_loss), worst);
}

INSTANTIATE_TEST_SUITE_P(LowPrecision, Gpt2MixedPrecisionTest,
                         ::testing::Values(PrecisionCase{DType::kBF16, 2e-3, 4e-2},
                                           PrecisionCase{DType::kF16, 5e-4, 5e-3}),
                         [](const auto& info) { return std::string(DTypeName(info.param.dtype)); });

}  // namespace
}  // namespace zeroshard

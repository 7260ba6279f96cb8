// GPT-2's split backward (BackwardInput + BackwardWeight) against Backward:
// bitwise equal input gradients and accumulated parameter gradients, for
// every unit, one micro-batch or two interleaved, f32 and bf16.
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/context.h"
#include "models/gpt2/gpt2.h"
#include "nn/resident_model.h"
#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::HostView;

// A CPU buffer of `dtype` holding `values` rounded to it.
Buffer Filled(DType dtype, const std::vector<float>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  Buffer b = Buffer::AllocateZeroed(nullptr, MemoryCategory::kGrads, Device::kCpu, dtype, n).value();
  EXPECT_TRUE(kernels::Cast(kernels::KernelContext::Cpu(), b.data(), dtype, values.data(), DType::kF32, n).ok());
  return b;
}

Buffer CopyOf(const Buffer& src) {
  Buffer b = Buffer::AllocateZeroed(nullptr, src.category(), src.device(), src.dtype(), src.numel()).value();
  std::memcpy(b.data(), src.data(), static_cast<size_t>(src.bytes()));
  return b;
}

bool SameBytes(const Buffer& a, const Buffer& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.bytes())) == 0;
}

void ExpectSamePacks(ActivationPack& actual, ActivationPack& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (int i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual.shape(i), expected.shape(i)) << what << " tensor " << i;
    EXPECT_TRUE(SameBytes(actual.buffer(i), expected.buffer(i))) << what << " tensor " << i << " differs";
  }
}

void ExpectSameGrads(const std::vector<Buffer>& actual, const std::vector<Buffer>& expected, const Unit& unit) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const std::string name =
        i < unit.params().size() ? unit.params()[i].name : unit.borrowed_params()[i - unit.params().size()];
    EXPECT_TRUE(SameBytes(actual[i], expected[i])) << unit.name() << ": gradient of " << name << " differs";
  }
}

class Gpt2SplitBackwardTest : public ::testing::TestWithParam<DType> {
 protected:
  static constexpr int64_t kB = 2, kT = 6, kMicroBatches = 2;

  void SetUp() override {
    ctx_.compute_dtype = GetParam();
    ctx_.tracker = &tracker_;
    model_ = BuildGpt2(cfg_).value();
    rm_ = std::make_unique<ResidentModel>(ResidentModel::Create(model_.get(), ctx_).value());
    ASSERT_TRUE(rm_->InitParams(seed_).ok());
    const int n = num_units();
    for (int m = 0; m < kMicroBatches; ++m) {
      tokens_[m].resize(kB * kT);
      targets_[m].resize(kB * kT);
      for (auto& t : tokens_[m]) t = static_cast<int32_t>(rng_() % cfg_.vocab_size);
      for (auto& t : targets_[m]) t = static_cast<int32_t>(rng_() % cfg_.vocab_size);
      batches_[m] = Gpt2Batch(HostView(tokens_[m], {kB, kT}), HostView(targets_[m], {kB, kT}));
      saved_[m].resize(n);
      outs_[m].resize(n);
      grad_outs_[m].resize(n);
      for (int u = 0; u < n; ++u) {
        std::vector<TensorView> in;
        if (u > 0) in = outs_[m][u - 1].views();
        UnitOutput out;
        ASSERT_TRUE(model_->units[u]->Forward(Uctx(u), ParamViews(u), batches_[m], in, &out, &saved_[m][u]).ok());
        outs_[m][u] = std::move(out.activations);
        if (u < n - 1) grad_outs_[m][u] = Filled(ctx_.compute_dtype, testing::RandomFloats(rng_, kB * kT * C(), 0.1f));
      }
    }
  }

  int num_units() const { return static_cast<int>(model_->units.size()); }
  int64_t C() const { return cfg_.n_embd; }
  const Unit& unit(int u) const { return *model_->units[u]; }
  UnitContext Uctx(int u) const {
    UnitContext uctx;
    uctx.compute = ctx_;
    uctx.rng_key = UnitRngKey(0, 0, 0, u);
    return uctx;
  }

  // Owned parameters, then borrowed ones (the resident model's).
  std::vector<TensorView> ParamViews(int u) {
    std::vector<TensorView> v;
    for (int i = 0; i < static_cast<int>(unit(u).params().size()); ++i) v.push_back(rm_->param({u, i}));
    for (const std::string& b : unit(u).borrowed_params()) v.push_back(rm_->param(model_->FindParam(b).value()));
    return v;
  }
  // The resident model's gradient views for unit u (wte.weight aliased).
  std::vector<TensorView> ResidentGradViews(int u) {
    std::vector<TensorView> v;
    for (int i = 0; i < static_cast<int>(unit(u).params().size()); ++i) v.push_back(rm_->grad({u, i}));
    for (const std::string& b : unit(u).borrowed_params()) v.push_back(rm_->grad(model_->FindParam(b).value()));
    return v;
  }

  // Standalone gradients for unit u (owned then borrowed), non-zero so that
  // accumulation is checked.
  std::vector<Buffer> RandomGrads(int u) {
    std::vector<Buffer> g;
    for (const TensorView& p : ParamViews(u)) {
      g.push_back(Filled(ctx_.compute_dtype, testing::RandomFloats(rng_, static_cast<size_t>(p.numel()), 0.5f)));
    }
    return g;
  }
  std::vector<TensorView> Views(std::vector<Buffer>& grads, int u) {
    std::vector<TensorView> p = ParamViews(u), v;
    for (size_t i = 0; i < grads.size(); ++i) v.push_back(ViewOf(grads[i], p[i].shape));
    return v;
  }
  static std::vector<Buffer> Copy(const std::vector<Buffer>& grads) {
    std::vector<Buffer> c;
    for (const Buffer& b : grads) c.push_back(CopyOf(b));
    return c;
  }

  std::vector<TensorView> GradOut(int m, int u) {
    if (u == num_units() - 1) return {TensorView{&dsum_[m], DType::kF32, {1}, Device::kCpu}};
    return {ViewOf(grad_outs_[m][u], {kB, kT, C()})};
  }
  // Between B and W: the caller's output gradient may be gone.
  void PoisonGradOut(int m, int u) {
    if (u == num_units() - 1) {
      dsum_[m] = std::numeric_limits<float>::quiet_NaN();
      return;
    }
    Buffer& b = grad_outs_[m][u];
    b = Filled(b.dtype(), std::vector<float>(static_cast<size_t>(b.numel()), std::numeric_limits<float>::quiet_NaN()));
  }

  const uint32_t seed_ = testing::TestSeed();
  const ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__,
                                           ::testing::Message() << DTypeName(GetParam()) << " seed " << seed_};
  std::mt19937 rng_{seed_};
  const Gpt2Config cfg_{2, 2, 16, 64, 8};
  MemoryTracker tracker_;
  ComputeContext ctx_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ResidentModel> rm_;
  std::vector<int32_t> tokens_[kMicroBatches], targets_[kMicroBatches];
  Batch batches_[kMicroBatches];
  std::vector<std::unique_ptr<SavedActivations>> saved_[kMicroBatches];
  std::vector<ActivationPack> outs_[kMicroBatches];
  std::vector<Buffer> grad_outs_[kMicroBatches];  // d/d(output) of every unit but the head
  float dsum_[kMicroBatches] = {1.0f / (kB * kT), 0.5f / (kB * kT)};
};

TEST_P(Gpt2SplitBackwardTest, EveryUnitSupportsSplitBackward) {
  for (const auto& u : model_->units) EXPECT_TRUE(u->SupportsSplitBackward()) << u->name();
}

// One micro-batch: B then W equals Backward bitwise; what B keeps is counted
// as kActivations and is exactly each layer's output gradient.
TEST_P(Gpt2SplitBackwardTest, EveryUnitSplitIsBitwiseBackward) {
  const int64_t n = kB * kT, c = C(), v = cfg_.vocab_size;
  const int64_t elem = static_cast<int64_t>(DTypeSize(ctx_.compute_dtype));
  for (int u = num_units() - 1; u >= 0; --u) {
    SCOPED_TRACE(unit(u).name());
    const std::vector<Buffer> initial = RandomGrads(u);
    std::vector<Buffer> fused = Copy(initial), split = Copy(initial);
    ActivationPack fused_in, split_in;
    ASSERT_TRUE(
        unit(u).Backward(Uctx(u), ParamViews(u), Views(fused, u), batches_[0], *saved_[0][u], GradOut(0, u), &fused_in)
            .ok());

    const int64_t act_before = tracker_.Usage(MemoryCategory::kActivations).current;
    const int64_t ws_before = tracker_.Usage(MemoryCategory::kWorkspace).current;
    std::unique_ptr<SavedActivations> wi;
    absl::Status s = unit(u).BackwardInput(Uctx(u), ParamViews(u), batches_[0], *saved_[0][u], GradOut(0, u),
                                           &split_in, &wi);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_NE(wi, nullptr);
    const int64_t expected_wi = u == 0 ? n * c * elem : u == num_units() - 1 ? (n * v + n * c) * elem
                                                                              : 11 * n * c * elem;
    EXPECT_EQ(wi->bytes(), expected_wi);
    EXPECT_EQ(tracker_.Usage(MemoryCategory::kActivations).current - act_before, wi->bytes() + split_in.bytes());
    EXPECT_EQ(tracker_.Usage(MemoryCategory::kWorkspace).current, ws_before);
    ExpectSamePacks(split_in, fused_in, "grad_in");
    {
      SCOPED_TRACE("after BackwardInput: unchanged");
      ExpectSameGrads(split, initial, unit(u));
    }

    PoisonGradOut(0, u);
    s = unit(u).BackwardWeight(Uctx(u), Views(split, u), batches_[0], *saved_[0][u], *wi);
    ASSERT_TRUE(s.ok()) << s;
    ExpectSameGrads(split, fused, unit(u));
    wi.reset();
    split_in.Clear();
    EXPECT_EQ(tracker_.Usage(MemoryCategory::kActivations).current, act_before);
  }
}

// Two micro-batches as a zero-bubble schedule runs them, B0 B1 W0 W1, against
// Backward on 0 then 1: each gradient gets mb0's then mb1's contribution.
TEST_P(Gpt2SplitBackwardTest, InterleavedMicroBatchesMatchFusedInOrder) {
  for (int u = num_units() - 1; u >= 0; --u) {
    SCOPED_TRACE(unit(u).name());
    const std::vector<Buffer> initial = RandomGrads(u);
    std::vector<Buffer> fused = Copy(initial), split = Copy(initial);
    ActivationPack fused_in[kMicroBatches], split_in[kMicroBatches];
    for (int m = 0; m < kMicroBatches; ++m) {
      ASSERT_TRUE(unit(u).Backward(Uctx(u), ParamViews(u), Views(fused, u), batches_[m], *saved_[m][u], GradOut(m, u),
                                   &fused_in[m])
                      .ok());
    }
    std::unique_ptr<SavedActivations> wi[kMicroBatches];
    for (int m = 0; m < kMicroBatches; ++m) {
      ASSERT_TRUE(unit(u).BackwardInput(Uctx(u), ParamViews(u), batches_[m], *saved_[m][u], GradOut(m, u),
                                        &split_in[m], &wi[m])
                      .ok());
    }
    for (int m = 0; m < kMicroBatches; ++m) PoisonGradOut(m, u);
    for (int m = 0; m < kMicroBatches; ++m) {
      ASSERT_TRUE(unit(u).BackwardWeight(Uctx(u), Views(split, u), batches_[m], *saved_[m][u], *wi[m]).ok());
    }
    for (int m = 0; m < kMicroBatches; ++m) ExpectSamePacks(split_in[m], fused_in[m], "grad_in mb" + std::to_string(m));
    ExpectSameGrads(split, fused, unit(u));
  }
}

// The whole model, every W deferred until every B has run (head to embed,
// so wte.weight still gets the head's term before the embedding's), on top
// of a fused step: the resident model's gradients bitwise.
TEST_P(Gpt2SplitBackwardTest, WholeModelWithDeferredWeightGradsMatchesResidentModel) {
  ComputeContext ref_ctx = ctx_;
  ref_ctx.tracker = nullptr;
  ResidentModel ref = ResidentModel::Create(model_.get(), ref_ctx).value();
  ASSERT_TRUE(ref.InitParams(seed_).ok());
  for (int m = 0; m < kMicroBatches; ++m) ASSERT_TRUE(ref.ForwardBackward(batches_[m], dsum_[m]).ok());

  ASSERT_TRUE(rm_->ForwardBackward(batches_[0], dsum_[0]).ok());  // non-zero gradients to accumulate onto
  const int n = num_units();
  std::vector<std::unique_ptr<SavedActivations>> wi(n);
  ActivationPack grad;
  for (int u = n - 1; u >= 0; --u) {
    std::vector<TensorView> grad_out = u == n - 1 ? GradOut(1, u) : grad.views();
    ActivationPack grad_in;
    ASSERT_TRUE(unit(u).BackwardInput(Uctx(u), ParamViews(u), batches_[1], *saved_[1][u], grad_out, &grad_in, &wi[u])
                    .ok())
        << unit(u).name();
    grad = std::move(grad_in);
  }
  EXPECT_TRUE(grad.empty());  // the embedding has no input gradient
  for (int u = n - 1; u >= 0; --u) {
    ASSERT_TRUE(unit(u).BackwardWeight(Uctx(u), ResidentGradViews(u), batches_[1], *saved_[1][u], *wi[u]).ok())
        << unit(u).name();
  }
  for (int u = 0; u < n; ++u) EXPECT_TRUE(SameBytes(rm_->unit_grads(u), ref.unit_grads(u))) << unit(u).name();
}

// Frozen parameters (null gradient views) are skipped; weight inputs of
// another unit are rejected.
TEST_P(Gpt2SplitBackwardTest, WeightGradsSkipFrozenAndCheckTheirInputs) {
  std::vector<std::unique_ptr<SavedActivations>> wi(num_units());
  for (int u = num_units() - 1; u >= 0; --u) {
    ActivationPack grad_in;
    ASSERT_TRUE(
        unit(u).BackwardInput(Uctx(u), ParamViews(u), batches_[0], *saved_[0][u], GradOut(0, u), &grad_in, &wi[u])
            .ok());
    std::vector<TensorView> frozen = ParamViews(u);
    for (TensorView& g : frozen) g.data = nullptr;
    absl::Status s = unit(u).BackwardWeight(Uctx(u), frozen, batches_[0], *saved_[0][u], *wi[u]);
    EXPECT_TRUE(s.ok()) << unit(u).name() << ": " << s;
  }
  std::vector<Buffer> g = RandomGrads(1);
  absl::Status s = unit(1).BackwardWeight(Uctx(1), Views(g, 1), batches_[0], *saved_[0][1], *wi[0]);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "h.0: weight inputs are not this unit's (pass what its BackwardInput returned)");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Gpt2SplitBackwardTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace zeroshard

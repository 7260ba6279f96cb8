// GPT-2's selective activation checkpointing at the unit level
// (docs/activation_checkpointing.md): a block's selective forward keeps
// exactly its selective estimate and gives bitwise the same output; its
// Backward, and BackwardInput + BackwardWeight, give bitwise the gradients
// of a full save; the rebuilt tensors are workspace that Backward frees.
#include <cstring>
#include <memory>
#include <random>
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

class Gpt2SelectiveCheckpointTest : public ::testing::TestWithParam<DType> {
 protected:
  static constexpr int64_t kB = 2, kT = 6;

  void SetUp() override {
    ctx_.compute_dtype = GetParam();
    ctx_.tracker = &tracker_;
    model_ = BuildGpt2(cfg_).value();
    rm_ = std::make_unique<ResidentModel>(ResidentModel::Create(model_.get(), ctx_).value());
    ASSERT_TRUE(rm_->InitParams(seed_).ok());
    tokens_.resize(kB * kT);
    targets_.resize(kB * kT);
    for (auto& t : tokens_) t = static_cast<int32_t>(rng_() % cfg_.vocab_size);
    for (auto& t : targets_) t = static_cast<int32_t>(rng_() % cfg_.vocab_size);
    batch_ = Gpt2Batch(HostView(tokens_, {kB, kT}), HostView(targets_, {kB, kT}));
    // The first block's input: the embedding's output.
    UnitOutput out;
    std::unique_ptr<SavedActivations> saved;
    ASSERT_TRUE(model_->units[0]->Forward(Uctx(false), ParamViews(0), batch_, {}, &out, &saved).ok());
    block_in_ = std::move(out.activations);
    grad_out_ = Filled(ctx_.compute_dtype, testing::RandomFloats(rng_, kB * kT * cfg_.n_embd, 0.1f));
  }

  UnitContext Uctx(bool selective) const {
    UnitContext uctx;
    uctx.compute = ctx_;
    uctx.selective_checkpoint = selective;
    return uctx;
  }
  std::vector<TensorView> ParamViews(int u) {
    std::vector<TensorView> v;
    for (int i = 0; i < static_cast<int>(model_->units[u]->params().size()); ++i) v.push_back(rm_->param({u, i}));
    return v;
  }
  std::vector<Buffer> RandomGrads(int u) {
    std::vector<Buffer> g;
    for (const TensorView& p : ParamViews(u)) {
      g.push_back(Filled(ctx_.compute_dtype, testing::RandomFloats(rng_, static_cast<size_t>(p.numel()), 0.5f)));
    }
    return g;
  }
  std::vector<TensorView> Views(std::vector<Buffer>& grads, int u, bool frozen = false) {
    std::vector<TensorView> p = ParamViews(u), v;
    for (size_t i = 0; i < grads.size(); ++i) {
      v.push_back(ViewOf(grads[i], p[i].shape));
      if (frozen) v.back().data = nullptr;
    }
    return v;
  }
  static std::vector<Buffer> Copy(const std::vector<Buffer>& grads) {
    std::vector<Buffer> c;
    for (const Buffer& b : grads) c.push_back(CopyOf(b));
    return c;
  }
  std::vector<TensorView> GradOut() { return {ViewOf(grad_out_, {kB, kT, cfg_.n_embd})}; }

  const uint32_t seed_ = testing::TestSeed();
  const ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__,
                                           ::testing::Message() << DTypeName(GetParam()) << " seed " << seed_};
  std::mt19937 rng_{seed_};
  const Gpt2Config cfg_{2, 2, 16, 64, 8};
  MemoryTracker tracker_;
  ComputeContext ctx_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ResidentModel> rm_;
  std::vector<int32_t> tokens_, targets_;
  Batch batch_;
  ActivationPack block_in_;
  Buffer grad_out_;
};

TEST_P(Gpt2SelectiveCheckpointTest, OnlyBlocksHaveASelectiveForm) {
  for (const auto& u : model_->units) {
    EXPECT_EQ(u->SupportsSelectiveCheckpointing(), u->name().rfind("h.", 0) == 0) << u->name();
  }
}

// The selective forward: bitwise the full forward's output, keeping exactly
// 10·N·C compute-dtype elements plus the f32 statistics (the estimate), and
// no workspace once it returns.
TEST_P(Gpt2SelectiveCheckpointTest, SelectiveForwardKeepsItsEstimateAndTheSameOutput) {
  const int u = 1;
  const Unit& block = *model_->units[u];
  const int64_t n = kB * kT, c = cfg_.n_embd, e = static_cast<int64_t>(DTypeSize(ctx_.compute_dtype));
  const int64_t stats = n * (4 + cfg_.n_head) * 4;
  EXPECT_EQ(block.EstimateSavedActivationBytes(kB, kT, ctx_.compute_dtype), 16 * n * c * e + stats);
  EXPECT_EQ(block.EstimateSelectiveSavedActivationBytes(kB, kT, ctx_.compute_dtype), 10 * n * c * e + stats);
  UnitOutput full_out, sel_out;
  std::unique_ptr<SavedActivations> full, sel;
  ASSERT_TRUE(block.Forward(Uctx(false), ParamViews(u), batch_, block_in_.views(), &full_out, &full).ok());
  const int64_t act_before = tracker_.Usage(MemoryCategory::kActivations).current;
  const int64_t ws_before = tracker_.Usage(MemoryCategory::kWorkspace).current;
  ASSERT_TRUE(block.Forward(Uctx(true), ParamViews(u), batch_, block_in_.views(), &sel_out, &sel).ok());
  EXPECT_EQ(full->bytes(), block.EstimateSavedActivationBytes(kB, kT, ctx_.compute_dtype));
  EXPECT_EQ(sel->bytes(), block.EstimateSelectiveSavedActivationBytes(kB, kT, ctx_.compute_dtype));
  EXPECT_EQ(tracker_.Usage(MemoryCategory::kActivations).current - act_before, sel->bytes() + sel_out.activations.bytes());
  EXPECT_EQ(tracker_.Usage(MemoryCategory::kWorkspace).current, ws_before);
  ASSERT_EQ(sel_out.activations.size(), 1);
  EXPECT_TRUE(SameBytes(sel_out.activations.buffer(0), full_out.activations.buffer(0)));
  // Evaluation ignores the flag: nothing is dropped when no backward follows.
  UnitContext eval = Uctx(true);
  eval.training = false;
  UnitOutput eval_out;
  std::unique_ptr<SavedActivations> eval_saved;
  ASSERT_TRUE(block.Forward(eval, ParamViews(u), batch_, block_in_.views(), &eval_out, &eval_saved).ok());
  EXPECT_EQ(eval_saved->bytes(), full->bytes());
}

// Backward from the selective save rebuilds ln_1, ln_2 and GELU: bitwise the
// full save's input gradient and accumulated parameter gradients; frozen
// (null) gradients skip the rebuild and still give the input gradient.
TEST_P(Gpt2SelectiveCheckpointTest, BackwardFromTheSelectiveSaveIsBitwiseTheFullOne) {
  const int u = 1;
  const Unit& block = *model_->units[u];
  UnitOutput full_out, sel_out;
  std::unique_ptr<SavedActivations> full, sel;
  ASSERT_TRUE(block.Forward(Uctx(false), ParamViews(u), batch_, block_in_.views(), &full_out, &full).ok());
  ASSERT_TRUE(block.Forward(Uctx(true), ParamViews(u), batch_, block_in_.views(), &sel_out, &sel).ok());
  for (bool frozen : {false, true}) {
    SCOPED_TRACE(frozen ? "frozen" : "trainable");
    const std::vector<Buffer> initial = RandomGrads(u);
    std::vector<Buffer> a = Copy(initial), b = Copy(initial);
    ActivationPack a_in, b_in;
    ASSERT_TRUE(block.Backward(Uctx(false), ParamViews(u), Views(a, u, frozen), batch_, *full, GradOut(), &a_in).ok());
    const int64_t ws_before = tracker_.Usage(MemoryCategory::kWorkspace).current;
    absl::Status s = block.Backward(Uctx(true), ParamViews(u), Views(b, u, frozen), batch_, *sel, GradOut(), &b_in);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(tracker_.Usage(MemoryCategory::kWorkspace).current, ws_before);
    ASSERT_EQ(b_in.size(), 1);
    EXPECT_TRUE(SameBytes(b_in.buffer(0), a_in.buffer(0))) << "input gradient differs";
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(SameBytes(b[i], a[i])) << "gradient of " << block.params()[i].name << " differs";
    }
  }
}

// The split backward from the selective save: B rebuilds ln_1, ln_2 and
// GELU into the weight inputs (6·N·C more than a full save's 11·N·C), and
// B + W give bitwise the fused Backward of a full save.
TEST_P(Gpt2SelectiveCheckpointTest, SplitBackwardFromTheSelectiveSaveIsBitwiseTheFullBackward) {
  const int u = 2;
  const Unit& block = *model_->units[u];
  const int64_t n = kB * kT, c = cfg_.n_embd, e = static_cast<int64_t>(DTypeSize(ctx_.compute_dtype));
  UnitOutput full_out, sel_out;
  std::unique_ptr<SavedActivations> full, sel;
  ASSERT_TRUE(block.Forward(Uctx(false), ParamViews(u), batch_, block_in_.views(), &full_out, &full).ok());
  ASSERT_TRUE(block.Forward(Uctx(true), ParamViews(u), batch_, block_in_.views(), &sel_out, &sel).ok());
  const std::vector<Buffer> initial = RandomGrads(u);
  std::vector<Buffer> fused = Copy(initial), split = Copy(initial);
  ActivationPack fused_in, split_in;
  ASSERT_TRUE(block.Backward(Uctx(false), ParamViews(u), Views(fused, u), batch_, *full, GradOut(), &fused_in).ok());
  std::unique_ptr<SavedActivations> wi;
  absl::Status s = block.BackwardInput(Uctx(true), ParamViews(u), batch_, *sel, GradOut(), &split_in, &wi);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(wi->bytes(), 17 * n * c * e);
  EXPECT_TRUE(SameBytes(split_in.buffer(0), fused_in.buffer(0))) << "input gradient differs";
  s = block.BackwardWeight(Uctx(true), Views(split, u), batch_, *sel, *wi);
  ASSERT_TRUE(s.ok()) << s;
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_TRUE(SameBytes(split[i], fused[i])) << "gradient of " << block.params()[i].name << " differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Gpt2SelectiveCheckpointTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace zeroshard

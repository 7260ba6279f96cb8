#include "sharding/sharded_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "core/testing/test_seed.h"
#include "gtest/gtest.h"
#include "kernels/lion.h"
#include "kernels/optimizer.h"
#include "sharding/optimizer_registry.h"

namespace zeroshard {
namespace {

// N = 7*5 + 5 + 5 = 45 over dp = 3, alignment 4: S = 16, P = 48 (3 padding).
FlatParamLayout MakeLayout() {
  auto layout = FlatParamLayout::Create(
      "h.0", 1, {{"h.0.attn.c_attn.weight", {7, 5}}, {"h.0.attn.c_attn.bias", {5}}, {"h.0.ln_1.weight", {5}}}, 3,
      4);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

std::vector<float> RandomVector(std::mt19937* rng, int64_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

OptimizerOptions AdamW() {
  OptimizerOptions o;
  o.name = "adamw";
  o.beta1 = 0.9f;
  o.beta2 = 0.95f;
  o.eps = 1e-8f;
  o.weight_decay = 0.1f;
  return o;
}

OptimizerOptions Lion() {
  OptimizerOptions o;
  o.name = "lion";
  o.beta1 = 0.9f;
  o.beta2 = 0.99f;
  o.weight_decay = 0.1f;
  return o;
}

OptimizerOptions SgdNesterov() {
  OptimizerOptions o;
  o.name = "sgd";
  o.momentum = 0.9f;
  o.nesterov = true;
  o.weight_decay = 0.01f;
  return o;
}

// The whole padded buffer updated by one optimizer equals, bitwise, the
// shards updated by dp optimizers, and the padding is never written.
void ExpectShardsMatchWhole(const OptimizerOptions& options) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const FlatParamLayout layout = MakeLayout();
  const int64_t P = layout.padded_numel(), S = layout.shard_numel(), N = layout.numel();
  std::vector<float> whole = RandomVector(&rng, P);
  for (int64_t i = N; i < P; ++i) whole[i] = 123.0f;  // sentinel in padding
  std::vector<float> sharded = whole;
  MemoryTracker tracker;
  auto full_opt = ShardedOptimizer::Create(options, {{&layout, 0, P}}, &tracker, kernels::KernelContext::Cpu(1));
  ASSERT_TRUE(full_opt.ok()) << full_opt.status();
  std::vector<std::unique_ptr<ShardedOptimizer>> shard_opts;
  for (int r = 0; r < 3; ++r) {
    auto opt = ShardedOptimizer::Create(options, {{&layout, r * S, S}}, &tracker, kernels::KernelContext::Cpu(1));
    ASSERT_TRUE(opt.ok()) << opt.status();
    shard_opts.push_back(std::move(*opt));
  }
  int64_t per_element = 0;  // what the plug-in declares: AdamW 8, SGD with momentum 4
  for (const OptimizerStateKind& k : (*full_opt)->state_kinds()) per_element += k.bytes_per_element;
  EXPECT_EQ(per_element, options.name == "adamw" ? 8 : 4);  // SGD with momentum, Lion: 4
  EXPECT_EQ(tracker.Usage(MemoryCategory::kOptimizerState).current, per_element * (P + 3 * S));
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> grad = RandomVector(&rng, P);
    for (int64_t i = N; i < P; ++i) grad[i] = 0.0f;
    float* wp = whole.data();
    const float* gp = grad.data();
    ASSERT_TRUE((*full_opt)->Step({&wp, 1}, {&gp, 1}, 1e-2f, step).ok());
    for (int r = 0; r < 3; ++r) {
      float* p = sharded.data() + r * S;
      const float* g = grad.data() + r * S;
      absl::Status s = shard_opts[r]->Step({&p, 1}, {&g, 1}, 1e-2f, step);
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  EXPECT_EQ(std::memcmp(whole.data(), sharded.data(), P * sizeof(float)), 0);
  for (int64_t i = N; i < P; ++i) EXPECT_EQ(whole[i], 123.0f) << "padding element " << i << " was written";
}

TEST(ShardedOptimizerTest, AdamWShardsEqualWholeBitwise) { ExpectShardsMatchWhole(AdamW()); }
TEST(ShardedOptimizerTest, SgdNesterovShardsEqualWholeBitwise) { ExpectShardsMatchWhole(SgdNesterov()); }
TEST(ShardedOptimizerTest, LionShardsEqualWholeBitwise) { ExpectShardsMatchWhole(Lion()); }

// Lion through the optimizer equals its kernel on each parameter with the
// group's decay: weights decay, the bias and LayerNorm do not (exact bits).
TEST(ShardedOptimizerTest, LionSegmentsMatchTheKernel) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const FlatParamLayout layout = MakeLayout();
  const int64_t P = layout.padded_numel();
  const std::vector<float> w0 = RandomVector(&rng, P), g = RandomVector(&rng, P);
  MemoryTracker tracker;
  const kernels::KernelContext ctx = kernels::KernelContext::Cpu(1);
  OptimizerOptions lion = Lion();
  lion.no_decay_patterns = {".bias", "ln_"};  // only the weight decays
  auto opt = ShardedOptimizer::Create(lion, {{&layout, 0, P}}, &tracker, ctx);
  ASSERT_TRUE(opt.ok()) << opt.status();
  ASSERT_EQ((*opt)->state_kinds().size(), 1u);
  EXPECT_EQ((*opt)->state_kinds()[0].checkpoint_name, "exp_avg");
  EXPECT_EQ(tracker.Usage(MemoryCategory::kOptimizerState).current, 4 * P);
  std::vector<float> w = w0;
  float* wp = w.data();
  const float* gp = g.data();
  for (int step = 1; step <= 2; ++step) ASSERT_TRUE((*opt)->Step({&wp, 1}, {&gp, 1}, 1e-2f, step).ok());
  std::vector<float> expected = w0, m(P, 0.0f);
  for (const FlatParamInfo& info : layout.params()) {
    const float wd = info.name == "h.0.attn.c_attn.weight" ? 0.1f : 0.0f;
    for (int step = 1; step <= 2; ++step) {
      ASSERT_TRUE(kernels::LionUpdate(ctx, expected.data() + info.offset, g.data() + info.offset,
                                      m.data() + info.offset, info.numel, kernels::LionHyper{1e-2f, 0.9f, 0.99f, wd})
                      .ok());
    }
  }
  EXPECT_EQ(std::memcmp(w.data(), expected.data(), layout.numel() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp((*opt)->state(0, 0).as<float>(), m.data(), layout.numel() * sizeof(float)), 0);
}

TEST(ShardedOptimizerTest, WeightDecayOnlyOnDecayedParameters) {
  // With zero gradients AdamW moves nothing but the decay: p *= 1 - lr*wd.
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const FlatParamLayout layout = MakeLayout();
  const int64_t P = layout.padded_numel();
  std::vector<float> p = RandomVector(&rng, P);
  const std::vector<float> before = p;
  std::vector<float> g(P, 0.0f);
  MemoryTracker tracker;
  // The layout's names, matched by patterns (a region without parameter
  // groups has no model marks).
  OptimizerOptions o = AdamW();
  o.no_decay_patterns = {".bias", "ln_"};
  auto opt = ShardedOptimizer::Create(o, {{&layout, 0, P}}, &tracker, kernels::KernelContext::Cpu(1));
  ASSERT_TRUE(opt.ok());
  float* pp = p.data();
  const float* gp = g.data();
  ASSERT_TRUE((*opt)->Step({&pp, 1}, {&gp, 1}, 0.5f, 1).ok());
  const float factor = 1.0f - 0.5f * 0.1f;
  for (int64_t i = 0; i < 35; ++i) EXPECT_EQ(p[i], before[i] * factor) << "weight element " << i;
  for (int64_t i = 35; i < 45; ++i) EXPECT_EQ(p[i], before[i]) << "bias/LayerNorm element " << i;
}

TEST(ShardedOptimizerTest, AdamWFirstStepMatchesFormula) {
  // Step 1: m = (1-b1) g, v = (1-b2) g^2, update = lr * g/|g| (up to eps).
  const FlatParamLayout layout = MakeLayout();
  const int64_t P = layout.padded_numel();
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::vector<float> p = RandomVector(&rng, P), g = RandomVector(&rng, P);
  for (int64_t i = layout.numel(); i < P; ++i) g[i] = 0;
  const std::vector<float> before = p;
  OptimizerOptions o = AdamW();
  o.weight_decay = 0;
  MemoryTracker tracker;
  auto opt = ShardedOptimizer::Create(o, {{&layout, 0, P}}, &tracker, kernels::KernelContext::Cpu(1));
  ASSERT_TRUE(opt.ok());
  float* pp = p.data();
  const float* gp = g.data();
  ASSERT_TRUE((*opt)->Step({&pp, 1}, {&gp, 1}, 1e-3f, 1).ok());
  for (int64_t i = 0; i < layout.numel(); ++i) {
    const double expected = before[i] - 1e-3 * g[i] / (std::fabs(g[i]) + 1e-8);
    EXPECT_NEAR(p[i], expected, 1e-6 * std::fabs(expected) + 1e-9) << i;
    EXPECT_NEAR((*opt)->state(0, 0).as<float>()[i], 0.1 * g[i], 1e-6 * std::fabs(g[i]));
    EXPECT_NEAR((*opt)->state(1, 0).as<float>()[i], 0.05 * g[i] * g[i], 1e-6 * g[i] * g[i]);
  }
}

TEST(ShardedOptimizerTest, RejectsBadRegionsAndOptions) {
  const FlatParamLayout layout = MakeLayout();
  MemoryTracker tracker;
  auto ctx = kernels::KernelContext::Cpu(1);
  absl::Status s = ShardedOptimizer::Create(AdamW(), {{&layout, 40, 16}}, &tracker, ctx).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "optimizer region [40, 56) is outside unit 'h.0' of 48 elements");
  OptimizerOptions bad = AdamW();
  bad.beta2 = 1.0f;
  s = ShardedOptimizer::Create(bad, {}, &tracker, ctx).status();
  EXPECT_EQ(s.message(), "beta2 is 1, expected in [0, 1)");
  OptimizerOptions nesterov = SgdNesterov();
  nesterov.dampening = 0.5f;
  EXPECT_EQ(ShardedOptimizer::Create(nesterov, {}, &tracker, ctx).status().code(),
            absl::StatusCode::kInvalidArgument);
  OptimizerOptions unknown = AdamW();
  unknown.name = "adam";
  s = ShardedOptimizer::Create(unknown, {}, &tracker, ctx).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown optimizer 'adam'; expected one of " + RegisteredOptimizerNames());
  auto opt = ShardedOptimizer::Create(AdamW(), {{&layout, 0, 16}}, &tracker, ctx);
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ((*opt)->Step({}, {}, 1.0f, 1).code(), absl::StatusCode::kInvalidArgument);
}

// A parameter group scales the learning rate and the weight decay of its
// parameter: each parameter updates exactly as alone with lr * lr_mult and
// weight_decay * weight_decay_mult.
TEST(ShardedOptimizerTest, ParameterGroupsScaleLrAndWeightDecay) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const FlatParamLayout layout = MakeLayout();  // weight [7,5], bias [5], ln_1.weight [5]
  const int64_t P = layout.padded_numel();
  const std::vector<ParamGroup> groups = {{1.0f, 0.5f}, {2.0f, 1.0f}, {0.0f, 3.0f}};
  const std::vector<float> w0 = RandomVector(&rng, P), g = RandomVector(&rng, P);
  MemoryTracker tracker;
  const kernels::KernelContext ctx = kernels::KernelContext::Cpu(1);
  auto grouped = ShardedOptimizer::Create(AdamW(), {{&layout, 0, P, groups}}, &tracker, ctx);
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  std::vector<float> w = w0;
  float* wp = w.data();
  const float* gp = g.data();
  ASSERT_TRUE((*grouped)->Step({&wp, 1}, {&gp, 1}, 1e-2f, 1).ok());
  for (size_t p = 0; p < groups.size(); ++p) {
    const FlatParamInfo& info = layout.params()[p];
    std::vector<float> expected(w0.begin() + info.offset, w0.begin() + info.offset + info.numel);
    std::vector<float> m(info.numel), v(info.numel);
    kernels::AdamWHyper h{1e-2f * groups[p].lr_mult, 0.9f, 0.95f, 1e-8f, 0.1f * groups[p].weight_decay_mult, 1};
    ASSERT_TRUE(kernels::AdamWUpdate(ctx, expected.data(), g.data() + info.offset, m.data(), v.data(), info.numel, h)
                    .ok());
    EXPECT_EQ(std::vector<float>(w.begin() + info.offset, w.begin() + info.offset + info.numel), expected)
        << info.name;
  }
  absl::StatusOr<std::unique_ptr<ShardedOptimizer>> bad =
      ShardedOptimizer::Create(AdamW(), {{&layout, 0, P, {{1.0f, 1.0f}}}}, &tracker, ctx);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "optimizer region of unit 'h.0' has 1 parameter groups, expected 3");
}

// Streaming (docs/offload_streaming.md): the region updated chunk by chunk
// through StepChunk with the state held outside the optimizer equals,
// bitwise, the whole-region StepRegions, for chunk lengths that cut the
// parameter segments at odd places (and a last chunk shorter than the rest).
void ExpectChunksMatchWhole(const OptimizerOptions& options) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << options.name);
  std::mt19937 rng(seed);
  const FlatParamLayout layout = MakeLayout();
  const int64_t P = layout.padded_numel(), S = layout.shard_numel();
  const std::vector<ParamGroup> groups = {{1.0f, 0.5f}, {0.0f, 1.0f}, {1.0f, 2.0f}};
  MemoryTracker tracker;
  const kernels::KernelContext ctx = kernels::KernelContext::Cpu(1);
  for (const auto& [begin, length] : std::vector<std::pair<int64_t, int64_t>>{{0, P}, {S, S}, {2 * S, S}}) {
    for (int64_t chunk : {1, 3, 7, 16, 40}) {
      SCOPED_TRACE(::testing::Message() << "region [" << begin << ", +" << length << ") chunk " << chunk);
      auto whole = ShardedOptimizer::Create(options, {{&layout, begin, length, groups}}, &tracker, ctx);
      ASSERT_TRUE(whole.ok()) << whole.status();
      auto chunked = ShardedOptimizer::Create(options, {{&layout, begin, length, groups}}, &tracker, ctx,
                                              /*allocate_state=*/false);
      ASSERT_TRUE(chunked.ok()) << chunked.status();
      EXPECT_FALSE((*chunked)->allocates_state());
      const size_t kinds = (*whole)->state_kinds().size();
      std::vector<float> w1 = RandomVector(&rng, length), w2 = w1;
      std::vector<std::vector<float>> state(kinds, std::vector<float>(length, 0.0f));
      for (int64_t step = 1; step <= 3; ++step) {
        const std::vector<float> g = RandomVector(&rng, length);
        float* wp = w1.data();
        const float* gp = g.data();
        const int region = 0;
        ASSERT_TRUE((*whole)->StepRegions({&region, 1}, {&wp, 1}, {&gp, 1}, 1e-2f, step).ok());
        for (int64_t off = 0; off < length; off += chunk) {
          const int64_t n = std::min(chunk, length - off);
          std::vector<void*> st;
          for (auto& k : state) st.push_back(k.data() + off);
          ASSERT_TRUE((*chunked)->StepChunk(0, off, n, w2.data() + off, g.data() + off, st, 1e-2f, step).ok());
        }
        ASSERT_EQ(0, std::memcmp(w1.data(), w2.data(), length * sizeof(float))) << "step " << step;
        for (size_t k = 0; k < kinds; ++k) {
          ASSERT_EQ(0, std::memcmp((*whole)->state(static_cast<int>(k), 0).data(), state[k].data(),
                                   length * sizeof(float)))
              << "state kind " << k << " step " << step;
        }
      }
    }
  }
}

TEST(ShardedOptimizerTest, ChunksWithExternalStateMatchTheWholeRegionAdamW) { ExpectChunksMatchWhole(AdamW()); }
TEST(ShardedOptimizerTest, ChunksWithExternalStateMatchTheWholeRegionLion) { ExpectChunksMatchWhole(Lion()); }
TEST(ShardedOptimizerTest, ChunksWithExternalStateMatchTheWholeRegionSgdMomentum) {
  ExpectChunksMatchWhole(SgdNesterov());
}

TEST(ShardedOptimizerTest, StepChunkChecksItsArguments) {
  const FlatParamLayout layout = MakeLayout();
  MemoryTracker tracker;
  auto opt = ShardedOptimizer::Create(AdamW(), {{&layout, 0, 16}}, &tracker, kernels::KernelContext::Cpu(1), false);
  ASSERT_TRUE(opt.ok()) << opt.status();
  EXPECT_EQ(tracker.Usage(MemoryCategory::kOptimizerState).current, 0);
  std::vector<float> w(16), g(16), m(16), v(16);
  std::vector<void*> st = {m.data(), v.data()};
  EXPECT_EQ((*opt)->StepChunk(0, 10, 7, w.data(), g.data(), st, 1e-2f, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*opt)->StepChunk(1, 0, 1, w.data(), g.data(), st, 1e-2f, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*opt)->StepChunk(0, 0, 1, w.data(), g.data(), {st.data(), 1}, 1e-2f, 1).code(),
            absl::StatusCode::kInvalidArgument);
  float* wp = w.data();
  const float* gp = g.data();
  EXPECT_EQ((*opt)->Step({&wp, 1}, {&gp, 1}, 1e-2f, 1).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zeroshard

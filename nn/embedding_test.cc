#include "nn/embedding.h"

#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::ExpectAllClose;
using testing::HostView;

TEST(EmbeddingTest, ForwardAndBackwardMatchF64ReferenceAndFiniteDifferences) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t b = 2, t = 3, v = 10, max_t = 5, c = 4;
  ComputeContext ctx;
  Embedding emb(v, max_t, c);
  std::vector<int32_t> tokens(b * t);
  for (auto& tok : tokens) tok = static_cast<int32_t>(rng() % 4);  // few ids: repeats exercise accumulation
  auto wte = testing::RandomFloats(rng, v * c, 1.0f), wpe = testing::RandomFloats(rng, max_t * c, 1.0f);
  auto out = testing::Poisoned(b * t * c);
  ASSERT_TRUE(emb.Forward(ctx, HostView(wte, {v, c}), HostView(wpe, {max_t, c}), HostView(tokens, {b, t}),
                          HostView(out, {b, t, c})).ok());
  auto ref = [&](const std::vector<double>& te, const std::vector<double>& pe) {
    std::vector<double> o(b * t * c);
    for (int64_t i = 0; i < b * t; ++i)
      for (int64_t k = 0; k < c; ++k) o[i * c + k] = te[tokens[i] * c + k] + pe[(i % t) * c + k];
    return o;
  };
  const auto ted = testing::ToDouble(wte), ped = testing::ToDouble(wpe);
  // f32 addition is correctly rounded: the f64 sum rounded to f32 must match exactly.
  std::vector<double> rounded = ref(ted, ped);
  for (double& x : rounded) x = static_cast<float>(x);
  ExpectAllClose(out, rounded, 0, 0, "out");

  auto dout = testing::RandomFloats(rng, b * t * c, 1.0f);
  auto dwte0 = testing::RandomFloats(rng, v * c, 1.0f), dwte = dwte0;
  auto dwpe0 = testing::RandomFloats(rng, max_t * c, 1.0f), dwpe = dwpe0;
  ASSERT_TRUE(emb.Backward(ctx, HostView(tokens, {b, t}), HostView(dout, {b, t, c}), HostView(dwte, {v, c}),
                           HostView(dwpe, {max_t, c})).ok());
  for (size_t i = 0; i < dwte.size(); ++i) dwte[i] -= dwte0[i];
  for (size_t i = 0; i < dwpe.size(); ++i) dwpe[i] -= dwpe0[i];
  auto objective = [&](const std::vector<double>& te, const std::vector<double>& pe) {
    const auto o = ref(te, pe);
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += o[i] * dout[i];
    return s;
  };
  ExpectAllClose(dwte, testing::NumericalGradient([&](const auto& x) { return objective(x, ped); }, ted), 1e-5, 1e-5, "dwte");
  ExpectAllClose(dwpe, testing::NumericalGradient([&](const auto& x) { return objective(ted, x); }, ped), 1e-5, 1e-5, "dwpe");
}

TEST(EmbeddingTest, RejectsSequencesLongerThanThePositionTable) {
  ComputeContext ctx;
  Embedding emb(10, 4, 2);
  std::vector<int32_t> tokens(5);
  std::vector<float> wte(20), wpe(8), out(10);
  absl::Status s = emb.Forward(ctx, HostView(wte, {10, 2}), HostView(wpe, {4, 2}), HostView(tokens, {1, 5}),
                               HostView(out, {1, 5, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "sequence length 5 exceeds the model's position table of 4");
}

TEST(EmbeddingTest, TokenOutsideVocabIsInvalidArgument) {
  ComputeContext ctx;
  Embedding emb(10, 4, 2);
  std::vector<int32_t> tokens = {1, 2, 10, 3};
  std::vector<float> wte(20), wpe(8), out(8);
  absl::Status s = emb.Forward(ctx, HostView(wte, {10, 2}), HostView(wpe, {4, 2}), HostView(tokens, {1, 4}),
                               HostView(out, {1, 4, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("10"), std::string::npos) << s;
}

}  // namespace
}  // namespace zeroshard

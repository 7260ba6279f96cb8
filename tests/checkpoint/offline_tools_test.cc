// reshard, consolidate, import, diff, inspect and verify on the fixture
// checkpoint (checkpoint/testing) and on a tiny GPT-2.
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/consolidate.h"
#include "checkpoint/diff.h"
#include "checkpoint/import_weights.h"
#include "checkpoint/inspect.h"
#include "checkpoint/manifest.h"
#include "checkpoint/reshard.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_file.h"
#include "checkpoint/testing/checkpoint_fixture.h"
#include "checkpoint/verify.h"
#include "core/file_io.h"
#include "core/testing/test_seed.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

using testing::FixtureManifest;
using testing::FlatValues;

struct Fixture {
  std::string root;
  CheckpointManifest manifest;
  uint32_t seed = 0;  // of the values, for the caller's SCOPED_TRACE
  FlatValues values;
};

Fixture WriteFixture(const std::string& name, int dp) {
  Fixture f;
  f.root = testing::FreshTempDir(name);
  f.manifest = FixtureManifest(dp, 9);
  f.seed = TestSeed();
  f.values = testing::RandomFlatValues(f.manifest, f.seed);
  EXPECT_TRUE(testing::WriteFixture(f.root, f.manifest, f.values).ok());
  return f;
}

void ExpectHolds(const CheckpointReader& r, const FlatValues& values) {
  for (int u = 0; u < r.manifest().units_size(); ++u) {
    for (int k = 0; k < r.manifest().kinds_size(); ++k) {
      const int64_t n = r.manifest().units(u).numel();
      std::vector<float> out(static_cast<size_t>(n), std::nanf(""));
      ASSERT_TRUE(r.ReadFlat(u, r.manifest().kinds(k), 0, n, out.data()).ok());
      EXPECT_EQ(out, values[u][k]) << "unit " << u << " kind " << k;
    }
  }
}

TEST(OfflineToolsTest, ReshardKeepsEveryValueAndTheRestOfTheManifest) {
  Fixture f = WriteFixture("tools_reshard", 4);
  SCOPED_TRACE(::testing::Message() << "values seed " << f.seed);
  absl::StatusOr<CheckpointReader> src = CheckpointReader::Open(f.root);
  ASSERT_TRUE(src.ok()) << src.status();
  for (int dp : {1, 2, 3, 5}) {
    const std::string out = JoinPath(f.root, absl::StrCat("../tools_reshard_out_", dp));
    absl::StatusOr<std::string> dir = ReshardCheckpoint(*src, out, {dp, 1, 1});
    ASSERT_TRUE(dir.ok()) << dir.status();
    absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->dp(), dp);
    EXPECT_EQ(r->manifest().step(), 9);
    EXPECT_EQ(r->manifest().data().sequences_consumed(), 72);
    EXPECT_EQ(r->manifest().producer(), "zeroshard ckpt reshard");
    EXPECT_TRUE(VerifyCheckpoint(out).empty());
    ExpectHolds(*r, f.values);
  }
  EXPECT_EQ(ReshardCheckpoint(*src, f.root + "_x", {0, 1, 1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OfflineToolsTest, ConsolidateIsIndependentOfDpAndWritesHuggingFaceNames) {
  Fixture f = WriteFixture("tools_consolidate", 4);
  SCOPED_TRACE(::testing::Message() << "values seed " << f.seed);
  absl::StatusOr<CheckpointReader> src = CheckpointReader::Open(f.root);
  ASSERT_TRUE(src.ok());
  const std::string out2 = f.root + "_dp2";
  ASSERT_TRUE(ReshardCheckpoint(*src, out2, {2, 1, 1}).ok());
  absl::StatusOr<CheckpointReader> dp2 = CheckpointReader::Open(out2);
  ASSERT_TRUE(dp2.ok());
  for (bool optimizer : {false, true}) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const std::string a = f.root + "_a.safetensors", b = f.root + "_b.safetensors";
      ASSERT_TRUE(ConsolidateCheckpoint(*src, a, {dtype, optimizer}).ok());
      ASSERT_TRUE(ConsolidateCheckpoint(*dp2, b, {dtype, optimizer}).ok());
      EXPECT_EQ(*ReadFileToString(a), *ReadFileToString(b)) << DTypeName(dtype) << " optimizer " << optimizer;
      absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(a);
      ASSERT_TRUE(file.ok());
      EXPECT_EQ(file->header().metadata.at("format"), "pt");
      EXPECT_EQ(file->header().metadata.at("zeroshard.step"), "9");
      EXPECT_EQ(file->header().tensors.size(), optimizer ? 18u : 6u);  // wte not duplicated for the tied head
      const SafetensorsTensorInfo* wte = file->header().Find("wte.weight");
      ASSERT_NE(wte, nullptr);
      EXPECT_EQ(wte->shape, (std::vector<int64_t>{11, 4}));
      EXPECT_EQ(wte->dtype, dtype);
      std::vector<float> got(44);
      ASSERT_TRUE(file->ReadAsF32("wte.weight", 0, 44, got.data()).ok());
      for (int i = 0; i < 44; ++i) {
        const float want = f.values[0][0][i];
        const float rounded = dtype == DType::kF32    ? want
                              : dtype == DType::kBF16 ? BF16ToF32(F32ToBF16(want))
                                                      : F16ToF32(F32ToF16(want));
        ASSERT_EQ(got[i], rounded) << i;
      }
      if (optimizer) {
        std::vector<float> v(6);
        ASSERT_TRUE(file->ReadAsF32("optimizer.exp_avg_sq.h.0.mlp.c_fc.bias", 0, 6, v.data()).ok());
        EXPECT_EQ(v, std::vector<float>(f.values[1][2].begin() + 24, f.values[1][2].end()));
      }
    }
  }
}

TEST(OfflineToolsTest, DiffReportsMaxAbsoluteAndRelativeDifference) {
  Fixture f = WriteFixture("tools_diff", 3);
  SCOPED_TRACE(::testing::Message() << "values seed " << f.seed);
  absl::StatusOr<CheckpointReader> a = CheckpointReader::Open(f.root);
  ASSERT_TRUE(a.ok());
  FlatValues changed = f.values;
  changed[1][0][25] += 0.5f;  // h.0.mlp.c_fc.bias[1], master
  const std::string other = f.root + "_other";
  ASSERT_TRUE(RemoveTree(other).ok());
  ASSERT_TRUE(testing::WriteFixture(other, FixtureManifest(2, 9), changed).ok());
  absl::StatusOr<CheckpointReader> b = CheckpointReader::Open(other);
  ASSERT_TRUE(b.ok());
  absl::StatusOr<std::vector<TensorDiff>> d = DiffCheckpoints(*a, *b);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 18u);  // 6 parameters x 3 kinds
  for (const TensorDiff& t : *d) {
    if (t.name == "h.0.mlp.c_fc.bias" && t.kind == "master") {
      const double x = f.values[1][0][25], y = changed[1][0][25];
      EXPECT_EQ(t.max_abs, std::fabs(x - y));
      EXPECT_EQ(t.max_rel, std::fabs(x - y) / std::max(std::fabs(x), std::fabs(y)));
    } else {
      EXPECT_EQ(t.max_abs, 0.0) << t.name << " " << t.kind;
      EXPECT_EQ(t.max_rel, 0.0);
    }
  }
  TensorDiff nan;
  const float x[3] = {1, NAN, 0}, y[3] = {1, NAN, 0};
  DiffValues(x, y, 3, &nan);
  EXPECT_EQ(nan.max_abs, 0.0);
  const float z[3] = {1, 2, 0};
  DiffValues(x, z, 3, &nan);
  EXPECT_TRUE(std::isinf(nan.max_abs));
}

TEST(OfflineToolsTest, VerifyAndInspect) {
  Fixture f = WriteFixture("tools_verify", 2);
  SCOPED_TRACE(::testing::Message() << "values seed " << f.seed);
  EXPECT_TRUE(VerifyCheckpoint(f.root).empty());
  const std::string path = JoinPath(JoinPath(f.root, "step_9"), "shard_pp000_dp00001_tp000.safetensors");
  std::string bytes = *ReadFileToString(path);
  bytes[bytes.size() - 1] ^= 0x20;
  ASSERT_TRUE(WriteFileDurably(path, {bytes}).ok());
  std::vector<absl::Status> problems = VerifyCheckpoint(f.root);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(problems[0].message().find("shard_pp000_dp00001_tp000.safetensors': tensor 'unit.3.exp_avg_sq'"), std::string::npos)
      << problems[0];
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(f.root);
  ASSERT_TRUE(r.ok());
  const std::string text = InspectCheckpoint(*r);
  EXPECT_NE(text.find("step:        9 (optimizer steps 9)"), std::string::npos) << text;
  EXPECT_NE(text.find("dp=2 tp=1 pp=1, saved by ZeRO stage 2"), std::string::npos) << text;
  EXPECT_NE(text.find("parameters:  102 (104 stored with padding) in 4 units"), std::string::npos) << text;
  EXPECT_NE(text.find("borrows wte.weight"), std::string::npos) << text;
}

TrainConfig TinyConfig(int dp) {
  TrainConfig c;
  c.mutable_model()->set_n_layer(1);
  c.mutable_model()->set_n_head(2);
  c.mutable_model()->set_n_embd(8);
  c.mutable_model()->set_vocab_size(13);
  c.mutable_model()->set_seq_len(4);
  c.mutable_engine()->mutable_parallel()->set_dp(dp);
  return c;
}

std::unique_ptr<Model> Gpt2Of(const TrainConfig& c) {
  Gpt2Config gc;
  gc.n_layer = c.model().n_layer();
  gc.n_head = c.model().n_head();
  gc.n_embd = c.model().n_embd();
  gc.vocab_size = c.model().vocab_size();
  gc.seq_len = c.model().seq_len();
  return std::move(BuildGpt2(gc)).value();
}

absl::StatusOr<std::string> Import(const std::string& in, const TrainConfig& c, const std::string& out) {
  return ImportCheckpoint(in, *Gpt2Of(c), Gpt2RunRecord(c), out);
}

// Random full GPT-2 weights from `seed` with the model's names, as a
// safetensors file.
std::map<std::string, std::vector<float>> WriteRandomWeights(const std::string& path, const TrainConfig& c,
                                                             uint32_t seed, const std::string& extra = "") {
  std::unique_ptr<Model> model = Gpt2Of(c);
  std::mt19937 rng(seed);
  std::map<std::string, std::vector<float>> weights;
  std::vector<SafetensorsTensorData> tensors;
  for (const auto& unit : model->units) {
    for (const ParamSpec& p : unit->params()) {
      int64_t n = 1;
      for (int64_t d : p.shape) n *= d;
      std::vector<float>& w = weights[p.name];
      w.resize(static_cast<size_t>(n));
      for (float& x : w) x = std::normal_distribution<float>()(rng);
      tensors.push_back({p.name, DType::kF32, p.shape, w.data()});
    }
  }
  static const float kOne = 1;
  if (!extra.empty()) tensors.push_back({extra, DType::kF32, {1}, &kOne});
  EXPECT_TRUE(WriteSafetensors(path, tensors, {}).ok());
  return weights;
}

TEST(OfflineToolsTest, ImportOfAConsolidatedFileReproducesTheWeightsExactly) {
  const std::string root = testing::FreshTempDir("tools_import");
  const std::string in = JoinPath(root, "in.safetensors");
  const TrainConfig config = TinyConfig(3);
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "weights seed " << seed);
  std::map<std::string, std::vector<float>> weights = WriteRandomWeights(in, config, seed);
  absl::StatusOr<std::string> dir = Import(in, config, JoinPath(root, "ckpt"));
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(JoinPath(root, "ckpt"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dp(), 3);
  EXPECT_EQ(r->manifest().step(), 0);
  for (int u = 0; u < r->manifest().units_size(); ++u) {
    for (int p = 0; p < r->manifest().units(u).params_size(); ++p) {
      const std::string& name = r->manifest().units(u).params(p).name();
      EXPECT_EQ(*r->ReadParam(u, p, "master"), weights[name]) << name;
      const std::vector<float> m = *r->ReadParam(u, p, "exp_avg");
      for (float x : m) ASSERT_EQ(x, 0.0f) << name;
    }
  }
  // consolidate -> import -> consolidate is the identity on the file.
  const std::string c1 = JoinPath(root, "c1.safetensors"), c2 = JoinPath(root, "c2.safetensors");
  ASSERT_TRUE(ConsolidateCheckpoint(*r, c1, {}).ok());
  ASSERT_TRUE(Import(c1, TinyConfig(2), JoinPath(root, "ckpt2")).ok());
  absl::StatusOr<CheckpointReader> r2 = CheckpointReader::Open(JoinPath(root, "ckpt2"));
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE(ConsolidateCheckpoint(*r2, c2, {}).ok());
  EXPECT_EQ(*ReadFileToString(c1), *ReadFileToString(c2));
}

TEST(OfflineToolsTest, ImportErrorsNameTheTensor) {
  const std::string root = testing::FreshTempDir("tools_import_errors");
  const std::string in = JoinPath(root, "in.safetensors");
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "weights seed " << seed);
  WriteRandomWeights(in, TinyConfig(1), seed, "h.0.attn.extra");
  absl::StatusOr<std::string> d = Import(in, TinyConfig(1), JoinPath(root, "a"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("tensor 'h.0.attn.extra' is not a parameter"), std::string::npos) << d.status();
  TrainConfig wider = TinyConfig(1);
  wider.mutable_model()->set_n_embd(16);
  WriteRandomWeights(in, TinyConfig(1), seed);
  d = Import(in, wider, JoinPath(root, "b"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("tensor 'wte.weight' has shape [13, 8], the config's model expects [13, 16]"),
            std::string::npos)
      << d.status();
  TrainConfig deeper = TinyConfig(1);
  deeper.mutable_model()->set_n_layer(2);
  d = Import(in, deeper, JoinPath(root, "c"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("has no tensor 'h.1.ln_1.weight'"), std::string::npos) << d.status();
  EXPECT_FALSE(PathExists(JoinPath(root, "c/latest")));
}

}  // namespace
}  // namespace zeroshard

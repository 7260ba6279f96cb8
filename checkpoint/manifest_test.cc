#include "checkpoint/manifest.h"

#include "absl/strings/str_replace.h"
#include "checkpoint/testing/checkpoint_fixture.h"
#include "gtest/gtest.h"
#include "google/protobuf/util/message_differencer.h"

namespace zeroshard {
namespace {

using testing::FixtureManifest;

// A complete manifest (files included) as the offline writer produces it.
CheckpointManifest WrittenManifest(int dp) {
  const std::string root = testing::FreshTempDir(absl::StrCat("manifest_", dp));
  CheckpointManifest m = FixtureManifest(dp, 5);
  absl::StatusOr<std::string> dir = testing::WriteFixture(root, m, testing::RandomFlatValues(m, 1));
  EXPECT_TRUE(dir.ok()) << dir.status();
  std::string text;
  absl::StatusOr<CheckpointManifest> read = DecodeManifest(EncodeManifest(m), "x");
  // Re-read what the writer produced (files filled in).
  FILE* f = std::fopen((*dir + "/manifest.pbtxt").c_str(), "rb");
  EXPECT_NE(f, nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  std::fclose(f);
  absl::StatusOr<CheckpointManifest> decoded = DecodeManifest(text, "manifest.pbtxt");
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *decoded : CheckpointManifest();
}

TEST(ManifestTest, EncodeDecodeRoundTrips) {
  const CheckpointManifest m = WrittenManifest(3);
  ASSERT_EQ(m.files_size(), 3);
  EXPECT_EQ(m.files(2).path(), "shard_pp000_dp00002_tp000.safetensors");
  EXPECT_EQ(m.units(0).shard_numel(), 24);  // 64 elements over 3 ranks, aligned to 4
  absl::StatusOr<CheckpointManifest> again = DecodeManifest(EncodeManifest(m), "m");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(m, *again));
  const std::string text = EncodeManifest(m);
  EXPECT_EQ(text.substr(text.size() - 18, 9), "# crc32c=");
}

TEST(ManifestTest, ChecksumLineIsRequiredAndChecked) {
  const std::string text = EncodeManifest(WrittenManifest(2));
  const std::string body = text.substr(0, text.size() - 18);
  absl::StatusOr<CheckpointManifest> no_line = DecodeManifest(body, "m.pbtxt");
  EXPECT_EQ(no_line.status().code(), absl::StatusCode::kDataLoss);
  std::string edited = text;
  edited[text.find("step: 5")] = '#';  // a comment now: still parses, checksum catches it
  absl::StatusOr<CheckpointManifest> bad = DecodeManifest(edited, "m.pbtxt");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("m.pbtxt: checksum mismatch"), std::string::npos) << bad.status();
}

TEST(ManifestTest, UnknownVersionIsUnimplemented) {
  CheckpointManifest m = WrittenManifest(2);
  for (int version : {0, 3}) {
    m.set_format_version(version);
    absl::StatusOr<CheckpointManifest> d = DecodeManifest(EncodeManifest(m), "m.pbtxt");
    EXPECT_EQ(d.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(d.status().message(), absl::StrCat("m.pbtxt: format_version ", version,
                                                 " is not supported; this build reads versions 1 to 2"));
  }
  m.set_format_version(1);  // dp-only checkpoints of earlier builds
  EXPECT_TRUE(DecodeManifest(EncodeManifest(m), "m.pbtxt").ok());
}

TEST(ManifestTest, ValidationNamesTheInconsistency) {
  const CheckpointManifest good = WrittenManifest(4);
  ASSERT_TRUE(ValidateManifest(good).ok());
  struct Case {
    std::function<void(CheckpointManifest*)> edit;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](CheckpointManifest* m) { m->mutable_files()->RemoveLast(); }, absl::StatusCode::kDataLoss,
       "checkpoint manifest: lists 3 shard files, expected one per (pp, dp, tp) rank (1 x 4 x 1)"},
      {[](CheckpointManifest* m) { m->mutable_topology()->set_dp(3); }, absl::StatusCode::kDataLoss,
       "checkpoint manifest: unit 0 has shard_numel 16, but numel 64 over dp 3 with alignment 4 gives 24"},
      {[](CheckpointManifest* m) { m->mutable_topology()->set_tp(2); }, absl::StatusCode::kDataLoss,
       "checkpoint manifest: lists 4 shard files, expected one per (pp, dp, tp) rank (1 x 4 x 2)"},
      {[](CheckpointManifest* m) {
         CheckpointParam* p = m->mutable_units(1)->mutable_params(1);  // h.0.mlp.c_fc.bias [6]
         p->add_global_shape(10);
         p->set_split_dim(0);
       },
       absl::StatusCode::kDataLoss,
       "checkpoint manifest: parameter 'h.0.mlp.c_fc.bias' of unit 1 is split along dim 0 of [10] into 1 block(s) "
       "over tp 1, which does not give its shape [6]"},
      {[](CheckpointManifest* m) { m->mutable_units(0)->set_stage(1); }, absl::StatusCode::kDataLoss,
       "checkpoint manifest: unit 0 has stage 1, expected in [0, 1)"},
      {[](CheckpointManifest* m) { m->mutable_files(2)->set_pp_rank(1); }, absl::StatusCode::kDataLoss,
       "checkpoint manifest: files[2] has (pp_rank, dp_rank, tp_rank) (1, 2, 0), expected (0, 2, 0)"},
      {[](CheckpointManifest* m) { m->mutable_files(2)->set_tp_rank(1); }, absl::StatusCode::kDataLoss,
       "checkpoint manifest: files[2] has (pp_rank, dp_rank, tp_rank) (0, 2, 1), expected (0, 2, 0)"},
      {[](CheckpointManifest* m) { m->mutable_units(1)->mutable_params(1)->set_offset(25); },
       absl::StatusCode::kDataLoss,
       "checkpoint manifest: parameter 'h.0.mlp.c_fc.bias' of unit 1 has offset 25 and numel 6, expected offset 24 "
       "and numel 6 (parameters are laid end to end)"},
      {[](CheckpointManifest* m) { m->set_kinds(1, "adam_m"); }, absl::StatusCode::kDataLoss,
       "checkpoint manifest: kind 'adam_m' is repeated or not one of master, exp_avg, exp_avg_sq, momentum"},
      {[](CheckpointManifest* m) { m->mutable_files(1)->set_path("../x"); }, absl::StatusCode::kDataLoss,
       "checkpoint manifest: files[1] path '../x' is not a plain file name"},
      {[](CheckpointManifest* m) { m->mutable_files(0)->set_size_bytes(1); }, absl::StatusCode::kDataLoss,
       "has size_bytes 1 but 8 + header_bytes"},
      {[](CheckpointManifest* m) { m->mutable_units(3)->set_borrowed(0, "lm_head.weight"); },
       absl::StatusCode::kDataLoss, "checkpoint manifest: unit 3 borrows unknown parameter 'lm_head.weight'"},
      {[](CheckpointManifest* m) { m->mutable_files(2)->mutable_tensors(0)->set_name("unit.0.exp_avg"); },
       absl::StatusCode::kDataLoss, "tensor 0 is 'unit.0.exp_avg' F32[16]"},
  };
  for (const Case& c : cases) {
    CheckpointManifest m = good;
    c.edit(&m);
    absl::Status s = ValidateManifest(m);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s;
  }
}

TEST(ManifestTest, LayoutsAtAnotherDp) {
  const CheckpointManifest m = WrittenManifest(4);
  absl::StatusOr<std::vector<FlatParamLayout>> l = LayoutsFromManifest(m, 3);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 4u);
  EXPECT_EQ((*l)[0].shard_numel(), 24);
  EXPECT_EQ((*l)[2].numel(), 0);
  EXPECT_EQ(ManifestParamCount(m), 64 + 30 + 0 + 8);
}

}  // namespace
}  // namespace zeroshard

#include "checkpoint/testing/checkpoint_fixture.h"

#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "checkpoint/manifest.h"
#include "checkpoint/offline_writer.h"
#include "core/file_io.h"

namespace zeroshard::testing {

CheckpointManifest FixtureManifest(int dp, int64_t step) {
  CheckpointManifest m;
  m.set_format_version(kManifestFormatVersion);
  m.set_step(step);
  m.set_optimizer_steps(step);
  m.mutable_topology()->set_dp(dp);
  m.mutable_topology()->set_tp(1);
  m.mutable_topology()->set_pp(1);
  m.mutable_topology()->set_zero_stage(2);
  m.mutable_topology()->set_alignment(4);
  m.add_kinds(kKindMaster);
  m.add_kinds(kKindExpAvg);
  m.add_kinds(kKindExpAvgSq);
  m.set_optimizer("adamw");
  m.set_producer("checkpoint_fixture");
  m.mutable_config()->set_model_name("gpt2");
  m.mutable_rng()->set_seed(1234);
  m.mutable_data()->set_step(step);
  m.mutable_data()->set_sequences_consumed(step * 8);
  struct P {
    const char* name;
    std::vector<int64_t> shape;
  };
  const std::vector<std::pair<const char*, std::vector<P>>> units = {
      {"embed", {{"wte.weight", {11, 4}}, {"wpe.weight", {5, 4}}}},
      {"h.0", {{"h.0.mlp.c_fc.weight", {4, 6}}, {"h.0.mlp.c_fc.bias", {6}}}},
      {"empty", {}},
      {"head", {{"ln_f.weight", {4}}, {"ln_f.bias", {4}}}},
  };
  for (size_t u = 0; u < units.size(); ++u) {
    CheckpointUnit* unit = m.add_units();
    unit->set_index(static_cast<int>(u));
    unit->set_name(units[u].first);
    int64_t at = 0;
    for (const P& p : units[u].second) {
      CheckpointParam* param = unit->add_params();
      param->set_name(p.name);
      int64_t numel = 1;
      for (int64_t d : p.shape) {
        param->add_shape(d);
        numel *= d;
      }
      param->set_offset(at);
      param->set_numel(numel);
      at += numel;
    }
    unit->set_numel(at);
    if (std::string(units[u].first) == "head") unit->add_borrowed("wte.weight");
  }
  return m;
}

FlatValues RandomFlatValues(const CheckpointManifest& manifest, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  FlatValues values(manifest.units_size());
  for (int u = 0; u < manifest.units_size(); ++u) {
    values[u].resize(manifest.kinds_size());
    for (auto& v : values[u]) {
      v.resize(static_cast<size_t>(manifest.units(u).numel()));
      for (float& x : v) x = normal(rng);
    }
  }
  return values;
}

absl::StatusOr<std::string> WriteFixture(const std::string& root, const CheckpointManifest& manifest,
                                         const FlatValues& values) {
  return WriteCheckpointOffline(root, manifest, [&](int u, int p, int k) -> absl::StatusOr<std::vector<float>> {
    const CheckpointParam& param = manifest.units(u).params(p);
    const float* begin = values[u][k].data() + param.offset();
    return std::vector<float>(begin, begin + param.numel());
  });
}

std::string FreshTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = JoinPath(base != nullptr ? base : "/tmp", absl::StrCat("ckpt_", name));
  RemoveTree(dir).IgnoreError();
  MakeDirectories(dir).IgnoreError();
  return dir;
}

}  // namespace zeroshard::testing

// Offline reshard throughput of a GPT-2 124M-shaped checkpoint (AdamW:
// master, exp_avg, exp_avg_sq) saved at (dp, tp, pp) = (2, 2, 2), to
// (1, 1, 1) and to (4, 1, 1); one process, no MPI. The source is written
// by `ckpt import` from random weights (its optimizer state is zero; the
// bytes read and written are those of any checkpoint of this shape).
// Prints a markdown table: bytes read and written, seconds (median over
// repeats), MB/s; then checks that consolidating a reshard gives the
// source's consolidated bytes.
//   reshard_bench_main DIR [repeats] [n_layer]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/consolidate.h"
#include "checkpoint/import_weights.h"
#include "checkpoint/reshard.h"
#include "checkpoint/safetensors.h"
#include "core/file_io.h"
#include "models/gpt2/gpt2_model_config.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t StepBytes(const CheckpointReader& r) {
  int64_t bytes = 0;
  for (const CheckpointFile& f : r.manifest().files()) bytes += f.size_bytes();
  return bytes;
}

// Random full weights of the config's model, whole and unpadded.
absl::Status WriteRandomWeights(const Model& model, const std::string& path) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<std::vector<float>> values;
  std::vector<SafetensorsTensorData> tensors;
  for (const auto& unit : model.units) {
    for (const ParamSpec& p : unit->params()) values.emplace_back(static_cast<size_t>(p.logical_numel()));
  }
  size_t i = 0;
  for (const auto& unit : model.units) {
    for (const ParamSpec& p : unit->params()) {
      for (float& x : values[i]) x = normal(rng);
      tensors.push_back({p.name, DType::kF32, p.logical(), values[i].data()});
      ++i;
    }
  }
  return WriteSafetensors(path, tensors, {{"format", "pt"}}).status();
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: reshard_bench_main DIR [repeats] [n_layer]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  TrainConfig config;
  ModelConfig* mc = config.mutable_model();
  mc->set_n_layer(argc > 3 ? std::atoi(argv[3]) : 12);
  mc->set_n_head(12);
  mc->set_n_embd(768);
  mc->set_vocab_size(50257);
  mc->set_seq_len(1024);
  ParallelConfig* par = config.mutable_engine()->mutable_parallel();
  par->set_dp(2);
  par->set_tp(2);
  par->set_pp(2);
  config.mutable_engine()->mutable_zero()->set_stage(1);
  auto model = BuildGpt2(Gpt2ConfigFromTrainConfig(config));
  if (!model.ok()) return 1;
  RemoveTree(dir).IgnoreError();
  if (!MakeDirectories(dir).ok()) return 1;
  const std::string weights = JoinPath(dir, "weights.safetensors");
  if (absl::Status s = WriteRandomWeights(**model, weights); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const std::string source_root = JoinPath(dir, "src_2x2x2");
  auto imported = ImportCheckpoint(weights, **model, Gpt2RunRecord(config), source_root);
  if (!imported.ok()) {
    std::fprintf(stderr, "%s\n", imported.status().ToString().c_str());
    return 1;
  }
  auto source = CheckpointReader::Open(source_root);
  if (!source.ok()) return 1;
  std::printf("## Offline reshard, GPT-2 124M-shaped (%d of 12 layers, %lld parameters), AdamW state\n\n",
              mc->n_layer(), static_cast<long long>((*model)->num_logical_params()));
  std::printf("| from -> to | files | read | written | seconds (median of %d) | MB/s read | MB/s written |\n",
              repeats);
  std::printf("|---|---|---|---|---|---|---|\n");
  const std::string consolidated_source = JoinPath(dir, "src.safetensors");
  ConsolidateOptions with_optimizer;
  with_optimizer.optimizer = true;
  if (!ConsolidateCheckpoint(*source, consolidated_source, with_optimizer).ok()) return 1;
  bool same_bytes = true;
  for (const GridShape& target : {GridShape{1, 1, 1}, GridShape{4, 1, 1}}) {
    const std::string out = JoinPath(dir, absl::StrCat("out_", target.dp, target.tp, target.pp));
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
      RemoveTree(out).IgnoreError();
      const auto t0 = std::chrono::steady_clock::now();
      auto written = ReshardCheckpoint(*source, out, target);
      times.push_back(Seconds(t0));
      if (!written.ok()) {
        std::fprintf(stderr, "%s\n", written.status().ToString().c_str());
        return 1;
      }
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    auto result = CheckpointReader::Open(out);
    if (!result.ok()) return 1;
    const double read_mb = StepBytes(*source) / 1e6, written_mb = StepBytes(*result) / 1e6;
    std::printf("| (2,2,2) -> (%d,%d,%d) | %d -> %d | %.1f MB | %.1f MB | %.2f | %.0f | %.0f |\n", target.dp,
                target.tp, target.pp, source->manifest().files_size(), result->manifest().files_size(), read_mb,
                written_mb, t, read_mb / t, written_mb / t);
    const std::string consolidated = out + ".safetensors";
    if (!ConsolidateCheckpoint(*result, consolidated, with_optimizer).ok()) return 1;
    auto a = ReadFileToString(consolidated_source), b = ReadFileToString(consolidated);
    same_bytes &= a.ok() && b.ok() && *a == *b;
  }
  std::printf("\nconsolidate(reshard(ckpt)) == consolidate(ckpt), byte for byte: %s\n", same_bytes ? "yes" : "NO");
  return same_bytes ? 0 : 1;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) { return zeroshard::Main(argc, argv); }

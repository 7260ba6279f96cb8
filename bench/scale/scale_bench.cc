// Hybrid sharding and int8 communication benchmark: run under `mpirun -np N`
// (bench/scale/run.sh does N = 4, dp N). A GPT-2 124M-shaped model (C 768,
// 12 heads, V 50257) with --layers of its 12 blocks and --seq positions, one
// global batch of --batch sequences per step (one micro-batch per rank), f32,
// ZeRO --stage, trained in five variants created up front and stepped
// interleaved (one warm-up step each, then --repeats rounds of one step per
// variant), so that every variant sees the same machine load:
//
//   full sharding                        shard group = dp
//   HSDP S 2                             engine.zero.shard_group_size 2
//   int8 weights                         weight_quantization INT8 (stage 3)
//   int8 gradients                       gradient_quantization INT8
//   int8 weights + gradients, HSDP S 2   all three
//
// Per variant: the median step time and its ratio to full sharding; the
// bytes each rank sends in one step on each dp group (comm_stats_by_group:
// "dp", or "dp_shard" and "dp_replica") and by op, against the bytes the
// engine's layouts, buckets and gathers predict (docs/parallelism.md, "Hybrid
// sharding" and "int8 communication"); the model state per rank against the
// ZeRO formula with N = the shard group size (docs/sharding.md).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/common/bench_util.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "kernels/context.h"
#include "models/gpt2/gpt2.h"
#include "sharding/flat_param_layout.h"
#include "sharding/quantized_shard.h"

ABSL_FLAG(int, layers, 2, "transformer blocks (12 in GPT-2 small)");
ABSL_FLAG(int, embd, 768, "model width (a multiple of --heads)");
ABSL_FLAG(int, heads, 12, "attention heads");
ABSL_FLAG(int, vocab, 50257, "vocabulary");
ABSL_FLAG(int, seq, 128, "tokens per sequence, also the learned positions (wpe rows)");
ABSL_FLAG(int, batch, 4, "sequences per global batch (a multiple of the world size)");
ABSL_FLAG(int, stage, 3, "ZeRO stage (int8 weights need 3: below it those variants are left out)");
ABSL_FLAG(int, shard_group, 2, "shard group size S of the HSDP variants (divides the world size)");
ABSL_FLAG(int, quantization_block, 2048, "elements per int8 scale (engine.zero.quantization_block)");
ABSL_FLAG(bool, error_feedback, false, "engine.zero.error_feedback in the int8-gradient variants");
ABSL_FLAG(int, threads, 1, "threads per rank (engine.device.threads_per_rank)");
ABSL_FLAG(int, repeats, 5, "timed steps per variant (after one warm-up)");

namespace zeroshard {
namespace {

using bench::Median;
using bench::AllRanks;
using bench::RoundUp;
using bench::StateBytes;
void Check(const absl::Status& s, const char* what) { bench::CheckOrExit(s, what); }

constexpr int64_t kF32 = 4;  // bytes of every compute, master and reduce element here

// Small counts (the norm all-reduce's few floats) in bytes, the rest in MB.
std::string Bytes(double bytes) {
  if (bytes < 1e4) return absl::StrFormat("%.0f B", bytes);
  return absl::StrFormat("%.3f MB", bytes / 1e6);
}

std::string Ratio(double measured, double theory) {
  if (theory == 0) return measured == 0 ? "-" : "inf";
  return absl::StrFormat("%.3f", measured / theory);
}

// What one variant changes in the engine config.
struct Variant {
  std::string name;
  int shard_group = 0;  // 0: all of dp
  bool int8_weights = false;
  bool int8_grads = false;
};

Gpt2Config Model() {
  Gpt2Config m;
  m.n_layer = absl::GetFlag(FLAGS_layers);
  m.n_embd = absl::GetFlag(FLAGS_embd);
  m.n_head = absl::GetFlag(FLAGS_heads);
  m.vocab_size = absl::GetFlag(FLAGS_vocab);
  m.seq_len = absl::GetFlag(FLAGS_seq);
  return m;
}

// "GPT-2 124M-shaped (C 768, 12 heads, V 50257) with 2 of 12 layers, T 128".
std::string ModelName() {
  const Gpt2Config m = Model(), small;
  const bool shaped = m.n_embd == small.n_embd && m.n_head == small.n_head && m.vocab_size == small.vocab_size;
  return absl::StrFormat("GPT-2%s (C %d, %d heads, V %d) with %d of 12 layers, T %d", shaped ? " 124M-shaped" : "",
                         m.n_embd, m.n_head, m.vocab_size, m.n_layer, m.seq_len);
}

// Elements of each unit (embed, h.0 ... h.{L-1}, head): wte and wpe; per
// block 12C² + 13C (attention and MLP weights and biases, two LayerNorms);
// ln_f.
std::vector<int64_t> UnitNumels(const Gpt2Config& m) {
  const int64_t c = m.n_embd;
  std::vector<int64_t> units;
  units.push_back(m.padded_vocab_size() * c + int64_t{m.seq_len} * c);
  for (int i = 0; i < m.n_layer; ++i) units.push_back(12 * c * c + 13 * c);
  units.push_back(2 * c);
  return units;
}

// ---------------------------------------------------------------------------
// Theory

// Bytes per rank per step on each dp group, by op, as the engine's own
// layouts, gradient buckets and gathers predict them (k = 1, ACCUMULATE):
//   shard group (n ranks; all of dp without HSDP):
//     stage 3: each gather of unit u   (n − 1) · part_u, part_u = 4·S_u, or
//              with int8 weights MaxPackedShardBytes (every rank's packed
//              runs padded to the largest rank's);
//     stages 0-2: one all-gather per unit (publication, stage 0: the
//              gradient shards) (n − 1) · 4·S_u;
//     per bucket b: reduce-scatter (n − 1) · 4·S_b, or with int8 gradients
//              an all-to-all of (n − 1) · max over destinations d of
//              Σ_{u in b} PackedShardBytes(QuantizationRuns(u, d));
//     without HSDP, the step's norm/loss/flags all-reduce (its world is dp):
//              2(n − 1)/n · 4·(5 + 2·metrics) bytes, rounded down;
//   replica group (R = dp / n ranks), per bucket: all-reduce of the reduced
//     f32 shard, 2(R − 1)/R · 4·S_b, rounded down.
// Under HSDP the norm all-reduce goes over the world, in neither dp group.
// `gathers[u]` is unit u's stage-3 gathers in the step (Engine::gathers
// delta).
std::map<std::string, CommStats> CommTheory(const Engine& engine, int stage, const std::vector<int64_t>& gathers,
                                            bool int8_weights, bool int8_grads, int64_t block) {
  const bool hybrid = engine.coordinates().replicas > 1;
  const std::string shard_group = hybrid ? "dp_shard" : "dp";
  std::map<std::string, CommStats> out;
  CommStats& s = out[shard_group];
  const int n = engine.layout(0).dp();
  for (int u = 0; u < engine.num_units(); ++u) {
    const FlatParamLayout& l = engine.layout(u);
    if (l.shard_numel() == 0) continue;
    if (stage == 3) {
      const int64_t part = int8_weights ? MaxPackedShardBytes(l, block) : l.shard_numel() * kF32;
      for (int64_t g = 0; g < gathers[u]; ++g) s.Record(CommOp::kAllGather, n, part, false);
    } else if (engine.trainable(u)) {
      s.Record(CommOp::kAllGather, n, l.shard_numel() * kF32, false);
    }
  }
  const GradReducer& reducer = engine.reducer();
  for (int b = 0; b < reducer.num_buckets(); ++b) {
    int64_t shard = 0;
    for (int u : reducer.bucket_units(b)) shard += engine.layout(u).shard_numel();
    if (shard == 0) continue;
    if (int8_grads) {
      int64_t chunk = 0;
      for (int d = 0; d < n; ++d) {
        int64_t bytes = 0;
        for (int u : reducer.bucket_units(b)) bytes += PackedShardBytes(QuantizationRuns(engine.layout(u), d), block);
        chunk = std::max(chunk, bytes);
      }
      s.Record(CommOp::kAllToAll, n, chunk, false);
    } else {
      s.Record(CommOp::kReduceScatter, n, shard * kF32, false);
    }
    if (hybrid) out["dp_replica"].Record(CommOp::kAllReduce, engine.coordinates().replicas, shard * kF32, false);
  }
  if (!hybrid) {
    const int64_t sums = 5 + 2 * static_cast<int64_t>(engine.plan().metric_names.size());
    s.Record(CommOp::kAllReduce, n, sums * kF32, false);
  }
  return out;
}

// The ZeRO formulas over the shard group (N = S), docs/parallelism.md: int8
// error feedback adds one f32 residual of the full P per unit (kGrads), 4Ψ
// without padding.
StateBytes StateTheory(int stage, int64_t full, int64_t shard, bool error_feedback) {
  StateBytes b = bench::ZeroStateBytes(stage, full, shard);
  if (error_feedback) b.grads += kF32 * full;
  return b;
}

double UnpaddedTheory(int stage, double psi, int n, bool error_feedback) {
  return bench::ZeroStateTheory(stage, psi, n) + (error_feedback ? 4 * psi : 0);
}

// ---------------------------------------------------------------------------
// Measurement

std::unique_ptr<ProcessGrid> MakeGrid(int dp, int shard_group) {
  CommOptions options;
  options.timeout = absl::Minutes(10);
  auto world = CreateMpiWorld(options);
  Check(world.status(), "CreateMpiWorld");
  auto grid = ProcessGrid::Create(std::move(world).value(), {dp, 1, 1, shard_group});
  Check(grid.status(), "ProcessGrid::Create");
  return std::make_unique<ProcessGrid>(std::move(grid).value());
}

EngineConfig Config(const Variant& v, int dp) {
  EngineConfig c;
  ZeroConfig* zero = c.mutable_zero();
  zero->set_stage(absl::GetFlag(FLAGS_stage));
  zero->set_shard_group_size(v.shard_group);
  zero->set_quantization_block(absl::GetFlag(FLAGS_quantization_block));
  if (v.int8_weights) zero->set_weight_quantization(ZeroConfig::INT8);
  if (v.int8_grads) {
    zero->set_gradient_quantization(ZeroConfig::INT8);
    zero->set_error_feedback(absl::GetFlag(FLAGS_error_feedback));
  }
  c.mutable_parallel()->set_dp(dp);
  c.mutable_optimizer()->set_lr(6e-4);
  c.mutable_device()->set_threads_per_rank(absl::GetFlag(FLAGS_threads));
  return c;
}

// One variant's engine on a grid of its own (so its counters are its own),
// its rank's micro-batch, and what one timed step measured.
struct Run {
  Variant variant;
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<Engine> engine;
  std::vector<HostBatch> batches;
  std::vector<Batch> views;
  std::vector<double> times;                // TrainStep totals of the timed steps
  std::vector<StepTimings> phases;          // and their phases
  std::map<std::string, CommStats> sent;    // comm_stats_by_group delta of the first timed step
  std::map<std::string, CommStats> theory;  // its prediction
  int64_t gathers = 0;                      // stage-3 unit gathers in that step
};

Run Start(const Variant& v, int world, const std::vector<int32_t>& tokens) {
  Run run;
  run.variant = v;
  run.grid = MakeGrid(world, v.shard_group);
  auto model = BuildGpt2(Model());
  Check(model.status(), "BuildGpt2");
  auto engine = Engine::Create(Config(v, world), run.grid.get(), std::move(model).value());
  Check(engine.status(), "Engine::Create");
  run.engine = std::move(engine).value();
  run.batches = MicroBatchesForRank(tokens, absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_seq), world, 1,
                                    run.grid->dp_rank());
  run.views = Views(run.batches);
  return run;
}

// One step, with its bytes and their prediction when `measure`.
void Step(Run& run, bool measure) {
  Engine& engine = *run.engine;
  std::vector<int64_t> gathers_before;
  for (int u = 0; u < engine.num_units(); ++u) gathers_before.push_back(engine.gathers(u));
  const std::map<std::string, CommStats> before = run.engine->comm_stats_by_group();
  absl::StatusOr<StepResult> r = run.engine->TrainStep(run.views);
  Check(r.status(), "TrainStep");
  run.times.push_back(r->timings.total);
  run.phases.push_back(r->timings);
  if (!measure) return;
  run.sent.clear();
  for (const auto& [group, stats] : run.engine->comm_stats_by_group()) run.sent[group] = stats - before.at(group);
  std::vector<int64_t> gathers(engine.num_units());
  run.gathers = 0;
  for (int u = 0; u < engine.num_units(); ++u) {
    gathers[u] = engine.gathers(u) - gathers_before[u];
    run.gathers += gathers[u];
  }
  run.theory = CommTheory(engine, absl::GetFlag(FLAGS_stage), gathers, run.variant.int8_weights,
                          run.variant.int8_grads, absl::GetFlag(FLAGS_quantization_block));
}

constexpr CommOp kOps[] = {CommOp::kAllGather, CommOp::kReduceScatter, CommOp::kAllToAll, CommOp::kAllReduce};
const char* const kGroups[] = {"dp", "dp_shard", "dp_replica"};

int64_t GroupBytes(const std::map<std::string, CommStats>& m, const std::string& group) {
  auto it = m.find(group);
  return it == m.end() ? 0 : it->second.Total().bytes_sent;
}

int64_t OpBytes(const std::map<std::string, CommStats>& m, CommOp op) {
  int64_t bytes = 0;
  for (const auto& [group, stats] : m) bytes += stats[op].bytes_sent;
  return bytes;
}

int64_t TotalBytes(const std::map<std::string, CommStats>& m) {
  int64_t bytes = 0;
  for (const auto& [group, stats] : m) bytes += stats.Total().bytes_sent;
  return bytes;
}

// Measured and predicted bytes of every (group, op) cell, flattened, so the
// ranks can compare them.
std::vector<int64_t> Cells(const Run& run) {
  std::vector<int64_t> v;
  for (const char* g : kGroups) {
    for (int i = 0; i < kNumCommOps; ++i) {
      const CommOp op = static_cast<CommOp>(i);
      auto sent = run.sent.find(g);
      auto want = run.theory.find(g);
      v.push_back(sent == run.sent.end() ? 0 : sent->second[op].bytes_sent);
      v.push_back(want == run.theory.end() ? 0 : want->second[op].bytes_sent);
    }
  }
  return v;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  kernels::SetCpuThreads(absl::GetFlag(FLAGS_threads));
  CommOptions options;
  options.timeout = absl::Minutes(10);
  auto probe = CreateMpiWorld(options);
  Check(probe.status(), "CreateMpiWorld");
  const int world = (*probe)->size();
  probe->reset();
  const int batch = absl::GetFlag(FLAGS_batch), stage = absl::GetFlag(FLAGS_stage);
  const int shard_group = absl::GetFlag(FLAGS_shard_group);
  if (batch % world != 0 || world % shard_group != 0) {
    std::fprintf(stderr, "scale_bench: --batch %d and --shard_group %d must divide by / divide the %d ranks\n",
                 batch, shard_group, world);
    return 2;
  }
  std::unique_ptr<ProcessGrid> world_grid = MakeGrid(world, 0);  // where the ranks compare their results
  const bool root = world_grid->world().rank() == 0;
  const Gpt2Config m = Model();
  const std::vector<int32_t> tokens = RandomTokens(11, batch, m.seq_len, m.vocab_size);
  const std::string hsdp = absl::StrCat("HSDP S ", shard_group);

  std::vector<Variant> variants = {
      {"full sharding", 0, false, false},
      {hsdp, shard_group, false, false},
      {"int8 weights", 0, true, false},
      {"int8 gradients", 0, false, true},
      {absl::StrCat("int8 weights + gradients, ", hsdp), shard_group, true, true},
  };
  if (stage != 3) {  // weight quantization is stage 3 only
    variants.erase(std::remove_if(variants.begin(), variants.end(), [](const Variant& v) { return v.int8_weights; }),
                   variants.end());
    variants.push_back({absl::StrCat("int8 gradients, ", hsdp), shard_group, false, true});
  }

  // Every engine first, one warm-up step each, then the timed rounds.
  std::vector<Run> runs;
  for (const Variant& v : variants) runs.push_back(Start(v, world, tokens));
  for (Run& run : runs) {
    Step(run, false);
    run.times.clear();
    run.phases.clear();
  }
  const int repeats = absl::GetFlag(FLAGS_repeats);
  for (int rep = 0; rep < repeats; ++rep) {
    for (Run& run : runs) Step(run, rep == 0);
  }

  // Bytes and memory are checked on every rank; times are rank 0's.
  std::vector<int64_t> mine;
  for (const Run& run : runs) {
    const std::vector<int64_t> cells = Cells(run);
    bool exact = true;
    for (size_t i = 0; i < cells.size(); i += 2) exact &= cells[i] == cells[i + 1];
    mine.push_back(exact ? 1 : 0);
  }
  struct Memory {
    StateBytes got, want;
    double unpadded = 0;
    int64_t psi = 0, padded = 0;
    int n = 0;
    bool layouts_match = true;
  };
  std::vector<Memory> memory(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const Engine& engine = *runs[i].engine;
    Memory& mem = memory[i];
    mem.n = engine.layout(0).dp();
    // The layouts against the shard-size rule: S = the smallest multiple of
    // 16·R elements with N·S >= the unit's numel (docs/parallelism.md).
    const std::vector<int64_t> numels = UnitNumels(m);
    mem.layouts_match = engine.num_units() == static_cast<int>(numels.size());
    int64_t shard = 0;
    for (int u = 0; u < engine.num_units(); ++u) {
      const FlatParamLayout& l = engine.layout(u);
      mem.psi += l.numel();
      shard += l.shard_numel();
      const int64_t want = RoundUp((numels[u] + mem.n - 1) / mem.n, kDefaultShardAlignment * engine.coordinates().replicas);
      mem.layouts_match &= l.numel() == numels[u] && l.shard_numel() == want;
    }
    mem.padded = shard * mem.n;
    const MemoryTracker& t = runs[i].engine->memory();
    mem.got.params = t.Usage(MemoryCategory::kParams).current;
    mem.got.grads = t.Usage(MemoryCategory::kGrads).current;
    mem.got.master = t.Usage(MemoryCategory::kMasterParams).current;
    mem.got.optimizer = t.Usage(MemoryCategory::kOptimizerState).current;
    const bool feedback = runs[i].variant.int8_grads && absl::GetFlag(FLAGS_error_feedback);
    mem.want = StateTheory(stage, mem.padded, shard, feedback);
    mem.unpadded = UnpaddedTheory(stage, static_cast<double>(mem.psi), mem.n, feedback);
    const bool exact = mem.got.params == mem.want.params && mem.got.grads == mem.want.grads &&
                       mem.got.master == mem.want.master && mem.got.optimizer == mem.want.optimizer;
    mine.push_back(exact && mem.layouts_match ? 1 : 0);
  }
  const auto all = AllRanks(world_grid->world(), mine);
  auto every_rank = [&](size_t i) {
    for (const auto& rank : all) {
      if (rank[i] != 1) return false;
    }
    return true;
  };

  if (root) {
    const unsigned cores = std::thread::hardware_concurrency();
    std::printf("\n## Step time and dp bytes per rank, %s, %d x %d tokens per step, ZeRO %d, f32, dp %d, %d "
                "thread(s) per rank, %u cores; median of %d interleaved steps\n\n",
                ModelName().c_str(), batch, m.seq_len, stage, world, absl::GetFlag(FLAGS_threads), cores, repeats);
    std::printf("Bytes: sent by each rank in one step (comm/comm_stats.h's ring convention), from "
                "comm_stats_by_group (\"dp\", or under HSDP \"dp_shard\" and \"dp_replica\"); the op columns sum "
                "over the groups. Theory: from the engine's layouts and buckets — per gather of a unit (n − 1)·4S "
                "(int8: (n − 1)·MaxPackedShardBytes), per gradient bucket (n − 1)·4S_b (int8: an all-to-all of "
                "(n − 1)·max_d Σ PackedShardBytes(QuantizationRuns(u, d))) on the shard group of n ranks, "
                "2(R − 1)/R·4S_b on the replica group of R; without HSDP also the step's norm/loss all-reduce "
                "on dp (under HSDP it runs on the world, in neither dp group). int8 block %d. \"every rank "
                "exact\": each (group, op) cell equals its theory on every rank.\n\n",
                absl::GetFlag(FLAGS_quantization_block));
    std::printf("| variant | step time | vs full | dp | dp_shard | dp_replica | AllGather | ReduceScatter | "
                "AllToAll | AllReduce | total | vs full | theory | measured / theory | gathers | every rank "
                "exact |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    const double base_time = Median(runs[0].times);
    const double base_bytes = static_cast<double>(TotalBytes(runs[0].sent));
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& run = runs[i];
      const double t = Median(run.times);
      std::string row = absl::StrFormat("| %s | %.1f ms | %.3f |", run.variant.name, t * 1e3, t / base_time);
      for (const char* g : kGroups) {
        absl::StrAppend(&row, " ", run.sent.count(g) != 0 ? Bytes(GroupBytes(run.sent, g)) : "-", " |");
      }
      for (CommOp op : kOps) absl::StrAppend(&row, " ", Bytes(OpBytes(run.sent, op)), " |");
      const int64_t total = TotalBytes(run.sent), theory = TotalBytes(run.theory);
      absl::StrAppend(&row, absl::StrFormat(" %s | %.3f | %s | %s | %lld | %s |", Bytes(total), total / base_bytes,
                                            Bytes(theory), Ratio(total, theory),
                                            static_cast<long long>(run.gathers), every_rank(i) ? "yes" : "no"));
      std::printf("%s\n", row.c_str());
    }

    // Where the time goes: compute and the waits for each kind of collective.
    std::printf("\nPhases of the same steps (medians, rank 0): forward and backward include everything between "
                "their units' computations; gather wait (stage-3 WaitGather: the all-gather, and with int8 weights "
                "the dequantization of every part) and reduce wait (each bucket's Finish: the reduce-scatter or "
                "all-to-all, the int8 parts' dequantized sum, the accumulation into the shard; under HSDP the wait "
                "for the previous bucket's replica all-reduce, its accumulation, and this bucket's issue, the "
                "pass's last bucket also waiting for its own) are parts of them; quantizing is in forward/backward. Optimizer includes the norm all-reduce.\n\n");
    std::printf("| variant | forward | backward | optimizer | gather wait | reduce wait | tokens/s |\n"
                "|---|---|---|---|---|---|---|\n");
    const int64_t tokens = int64_t{batch} * m.seq_len;
    for (const Run& run : runs) {
      auto median = [&](double StepTimings::*field) {
        std::vector<double> v;
        for (const StepTimings& t : run.phases) v.push_back(t.*field);
        return Median(v) * 1e3;
      };
      std::printf("| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.0f |\n", run.variant.name.c_str(),
                  median(&StepTimings::forward), median(&StepTimings::backward), median(&StepTimings::optimizer),
                  median(&StepTimings::gather_wait), median(&StepTimings::reduce_wait),
                  tokens / Median(run.times));
    }

    std::printf("\n## Model-state bytes per rank after %d steps\n\n", repeats + 1);
    std::printf("params + grads + master + optimizer (engine.memory()) against the ZeRO formula over the shard "
                "group, N = S (docs/parallelism.md): stage 3: 20P/N (1: 8P + 12P/N, 2: 4P + 16P/N) bytes, P = Σ "
                "units' padded flat buffers, each unit's shard the smallest multiple of 16·R elements with N·S ≥ "
                "its numel; \"theory (Ψ)\" without the padding%s. int8 staging (kCommBuffers) is transient and "
                "not model state.\n\n",
                absl::GetFlag(FLAGS_error_feedback) ? "; error feedback adds 4P (a full f32 residual, grads)" : "");
    std::printf("| variant | N | Ψ | P | params | grads | master | optimizer | total | theory (Ψ) | theory (P) | "
                "measured / theory (P) | vs full | every rank exact |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < runs.size(); ++i) {
      const Memory& mem = memory[i];
      std::printf("| %s | %d | %lld | %lld | %s | %s | %s | %s | %s | %s | %s | %s | %.3f | %s |\n",
                  runs[i].variant.name.c_str(), mem.n, static_cast<long long>(mem.psi),
                  static_cast<long long>(mem.padded), Bytes(mem.got.params).c_str(), Bytes(mem.got.grads).c_str(),
                  Bytes(mem.got.master).c_str(), Bytes(mem.got.optimizer).c_str(), Bytes(mem.got.total()).c_str(),
                  Bytes(mem.unpadded).c_str(), Bytes(mem.want.total()).c_str(),
                  Ratio(mem.got.total(), mem.want.total()).c_str(),
                  static_cast<double>(mem.got.total()) / memory[0].got.total(),
                  every_rank(runs.size() + i) ? "yes" : "no");
    }

    // docs/parallelism.md's per-shard int8 formula, (n − 1)·(round_up(S, 4)
    // + 4·⌈S/B⌉), packs the shard as one run; the engine packs every
    // parameter's run on its own and pads every rank's part to the largest.
    std::printf("\n## int8 parts: one packed shard vs the engine's per-parameter runs\n\n");
    std::printf("Per unit of the shard group of n ranks: S, the docs' one-run packing round_up(S, 4) + 4·⌈S/B⌉, "
                "MaxPackedShardBytes (what a gather moves per rank) and the ratio; f32 moves 4S.\n\n");
    std::printf("| n | unit | S | one run | per-parameter runs (max over ranks) | ratio | vs f32 |\n"
                "|---|---|---|---|---|---|---|\n");
    const int64_t block = absl::GetFlag(FLAGS_quantization_block);
    std::vector<int> shown;
    for (const Run& run : runs) {
      const Engine& engine = *run.engine;
      const int n = engine.layout(0).dp();
      if (std::find(shown.begin(), shown.end(), n) != shown.end()) continue;
      shown.push_back(n);
      for (int u = 0; u < engine.num_units(); ++u) {
        const FlatParamLayout& l = engine.layout(u);
        const int64_t s = l.shard_numel(), one_run = RoundUp(s, 4) + 4 * ((s + block - 1) / block);
        const int64_t runs_bytes = MaxPackedShardBytes(l, block);
        std::printf("| %d | %s | %lld | %lld | %lld | %.6f | %.4f |\n", n, l.unit_name().c_str(),
                    static_cast<long long>(s), static_cast<long long>(one_run), static_cast<long long>(runs_bytes),
                    static_cast<double>(runs_bytes) / one_run, static_cast<double>(runs_bytes) / (4.0 * s));
      }
    }
  }
  std::fflush(stdout);
  runs.clear();  // engines and their communicators go before MPI finalises
  world_grid.reset();
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  const int code = zeroshard::Main(argc, argv);
  zeroshard::FinalizeMpi();
  return code;
}

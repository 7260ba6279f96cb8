// Tensor-parallel benchmark: run under `mpirun -np N` (bench/tp/run.sh does
// N = 4). Every layout dp x tp = N with tp dividing N and n_head (N = 4:
// (4, 1), (2, 2), (1, 4)), sequence parallelism off and, at tp > 1, on; a
// GPT-2 124M-shaped model (C 768, 12 heads, V 50257) with --layers of its 12
// blocks and --seq positions, one global batch of --batch sequences of --seq
// tokens per step (one micro-batch per rank: dp ranks share it, a tp group's
// ranks see the same one), f32 compute. --embd, --heads and --vocab change
// the shape: GPT-2's own never pads a flat buffer at dp·tp <= 48 (every unit
// a tp rank holds is a multiple of 768/tp elements, so each dp shard is a
// multiple of 16), a width like 120 does.
//
//   time:        step time of every layout at ZeRO --stage, the layouts
//                interleaved step by step in one run, median of --repeats,
//                and its ratio to (dp N, tp 1);
//   model state: per layout and ZeRO stage 0-3, params / grads / master /
//                optimizer bytes per rank after one step vs the ZeRO
//                formulas applied to the parameters a tp rank holds,
//                Ψ_local = Ψ_split/tp + Ψ_rep (Ψ_split counts wte with the
//                vocabulary padded to Vp, a multiple of tp), each unit's
//                flat buffer padded as sharding/flat_param_layout.h does;
//   activations: peak kActivations bytes in one step vs the saved-tensor
//                formulas of docs/model.md, and what sequence parallelism
//                saves;
//   comm:        calls and bytes sent per op on the tp communicator over
//                one step vs docs/model.md's per-call collectives (bytes in
//                comm/comm_stats.h's ring convention), and the dp bytes
//                (all-gather + reduce-scatter) vs docs/sharding.md.
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

ABSL_FLAG(int, layers, 2, "transformer blocks (12 in GPT-2 small)");
ABSL_FLAG(int, embd, 768, "model width (a multiple of --heads)");
ABSL_FLAG(int, heads, 12, "attention heads");
ABSL_FLAG(int, vocab, 50257, "vocabulary (padded to a multiple of tp)");
ABSL_FLAG(int, seq, 128, "tokens per sequence, also the learned positions (wpe rows)");
ABSL_FLAG(int, batch, 4, "sequences per global batch (a multiple of the world size)");
ABSL_FLAG(int, stage, 1, "ZeRO stage of the time, activation and comm tables");
ABSL_FLAG(int, repeats, 5, "timed steps per layout (after one warm-up)");
ABSL_FLAG(bool, memory, true, "run the model-state table (every layout at ZeRO 0-3)");
ABSL_FLAG(bool, time, true, "run the step-time, activation and comm tables");

namespace zeroshard {
namespace {

using bench::Median;
using bench::AllRanks;
using bench::RoundUp;
using bench::StateBytes;
void Check(const absl::Status& s, const char* what) { bench::CheckOrExit(s, what); }

constexpr int64_t kF32 = 4;  // bytes of every compute, master and reduce element here

std::string Mb(double bytes) { return absl::StrFormat("%.3f MB", bytes / 1e6); }

std::string Ratio(double measured, double theory) {
  if (theory == 0) return measured == 0 ? "-" : "inf";
  return absl::StrFormat("%.6f", measured / theory);
}

struct Layout {
  int dp = 1, tp = 1;
  bool sp = false;
  bool keep = false;  // engine.parallel.keep_gathered_ln_outputs (with sp)
  std::string Name() const { return absl::StrCat("dp ", dp, ", tp ", tp); }
  std::string Sp() const { return tp == 1 ? "-" : keep ? "on, LN outputs kept" : sp ? "on" : "off"; }
};

Gpt2Config Model(int tp) {
  Gpt2Config m;
  m.n_layer = absl::GetFlag(FLAGS_layers);
  m.n_embd = absl::GetFlag(FLAGS_embd);
  m.n_head = absl::GetFlag(FLAGS_heads);
  m.vocab_size = absl::GetFlag(FLAGS_vocab);
  m.seq_len = absl::GetFlag(FLAGS_seq);
  m.vocab_multiple = tp;  // as the trainer does (models/gpt2/gpt2_model_config.cc)
  return m;
}

// "GPT-2 124M-shaped (C 768, 12 heads, V 50257) with 2 of 12 layers, T 128".
std::string ModelName() {
  const Gpt2Config m = Model(1), small;
  const bool shaped = m.n_embd == small.n_embd && m.n_head == small.n_head && m.vocab_size == small.vocab_size;
  return absl::StrFormat("GPT-2%s (C %d, %d heads, V %d) with %d of 12 layers, T %d", shaped ? " 124M-shaped" : "",
                         m.n_embd, m.n_head, m.vocab_size, m.n_layer, m.seq_len);
}

// ---------------------------------------------------------------------------
// Theory

// Elements of each unit's parameters as one tp rank holds them (embed,
// h.0 ... h.{L-1}, head): wte split on rows of the padded vocabulary; in a
// block c_attn, c_fc (weights and biases) and both c_proj weights split, the
// LayerNorms and both c_proj biases replicated; wpe and ln_f replicated.
std::vector<int64_t> LocalUnitNumels(const Gpt2Config& m, int tp) {
  const int64_t c = m.n_embd;
  std::vector<int64_t> units;
  units.push_back(m.padded_vocab_size() * c / tp + int64_t{m.seq_len} * c);
  const int64_t split = 12 * c * c + 7 * c, replicated = 6 * c;
  for (int i = 0; i < m.n_layer; ++i) units.push_back(split / tp + replicated);
  units.push_back(2 * c);
  return units;
}

// Ψ_split (global, wte with Vp rows) and Ψ_rep.
std::pair<int64_t, int64_t> SplitAndReplicated(const Gpt2Config& m) {
  const int64_t c = m.n_embd;
  const int64_t split = m.padded_vocab_size() * c + m.n_layer * (12 * c * c + 7 * c);
  const int64_t replicated = int64_t{m.seq_len} * c + m.n_layer * 6 * c + 2 * c;
  return {split, replicated};
}

// A unit's shard S: the smallest multiple of the alignment with dp·S >= N
// (sharding/flat_param_layout.h); its padded buffer is dp·S.
int64_t ShardNumel(int64_t numel, int dp) { return RoundUp((numel + dp - 1) / dp, kDefaultShardAlignment); }

// Per-rank token rows of one micro-batch: N = B·T, and the rows the
// LayerNorm/residual regions hold (N/tp under sequence parallelism).
struct Rows {
  int64_t b = 0, t = 0, n = 0, local = 0;
};

Rows RowsOf(const Layout& l) {
  Rows r;
  r.b = absl::GetFlag(FLAGS_batch) / l.dp;
  r.t = absl::GetFlag(FLAGS_seq);
  r.n = r.b * r.t;
  r.local = l.sp ? r.n / l.tp : r.n;
  return r;
}

// Saved activations (docs/model.md, f32): per block the LayerNorm/residual
// region x, ln_1, res2, ln_2 (4·rows·C) with four f32 statistics
// (16·rows), the tensor-parallel region qkv, attention output, c_fc, GELU
// (12·N·C/tp) and the local heads' log-sum-exp (4·B·NH/tp·T); the head
// its input rows, ln_f's output on all N rows, ln_f's statistics for its
// rows, the local logits (N·Vp/tp) and lse (N). The peak of a step is at
// the head's forward: every unit's saved tensors plus the head's input, the
// last block's output (rows·C), which the engine frees right after.
struct ActivationTheory {
  int64_t ln_residual = 0;  // all blocks' LayerNorm/residual region
  int64_t tp_region = 0;    // all blocks' tensor-parallel region
  int64_t head = 0;         // the head's saved tensors and its input
  int64_t total() const { return ln_residual + tp_region + head; }
};

ActivationTheory ActivationsOf(const Gpt2Config& m, const Layout& l) {
  const Rows r = RowsOf(l);
  const int64_t c = m.n_embd, e = kF32, tp = l.tp;
  ActivationTheory a;
  // Keeping the gathered LayerNorm outputs: ln_1 and ln_2 on all N rows.
  const int64_t ln_rows = l.keep ? 2 * r.local + 2 * r.n : 4 * r.local;
  a.ln_residual = m.n_layer * (ln_rows * c * e + 16 * r.local);
  a.tp_region = m.n_layer * (12 * r.n * c / tp * e + 4 * r.b * (m.n_head / tp) * r.t);
  a.head = r.local * c * e + r.n * c * e + 8 * r.local + r.n * (m.padded_vocab_size() / tp) * e + 4 * r.n +
           r.local * c * e;
  return a;
}

// Collectives on the tp communicator in one step (forward and backward of
// every unit, one micro-batch), from docs/model.md's per-call tables.
CommStats TpCommTheory(const Gpt2Config& m, const Layout& l) {
  CommStats s;
  if (l.tp == 1) return s;
  const Rows r = RowsOf(l);
  const int64_t c = m.n_embd, e = kF32, nc = r.n * c * e, local_nc = r.n / l.tp * c * e;
  auto add = [&](CommOp op, int64_t bytes_per_rank, int times) {
    for (int i = 0; i < times; ++i) s.Record(op, l.tp, bytes_per_rank, false);
  };
  const int blocks = m.n_layer;
  if (!l.sp) {
    add(CommOp::kAllReduce, nc, 4 * blocks);  // per block: attn/mlp c_proj outputs, c_attn/c_fc input grads
    add(CommOp::kAllReduce, nc, 1);           // embed output
    add(CommOp::kAllReduce, r.n * 4, 1);      // head: the logits' row max (f32)
    add(CommOp::kAllReduce, 2 * r.n * 4, 1);  // head: sum-exp and target logit (f32)
    add(CommOp::kAllReduce, nc, 1);           // head: ln_f's output grad
    return s;
  }
  // Per block forward: gather ln_1, ln_2 outputs, reduce-scatter both c_proj
  // outputs; backward: gather dy, ln_2 out, attn.c_proj dY, ln_1 out (the
  // two LN outputs not when kept), reduce-scatter both column-parallel input
  // grads, all-reduce the 4C LayerNorm grads.
  add(CommOp::kAllGather, local_nc, (l.keep ? 4 : 6) * blocks);
  add(CommOp::kReduceScatter, local_nc, 4 * blocks);
  add(CommOp::kAllReduce, 4 * c * e, blocks);
  add(CommOp::kReduceScatter, local_nc, 1);  // embed output
  add(CommOp::kAllGather, local_nc, 1);      // embed output grad
  add(CommOp::kAllGather, local_nc, 1);      // head: ln_f's output
  add(CommOp::kAllReduce, r.n * 4, 1);       // head: row max
  add(CommOp::kAllReduce, 2 * r.n * 4, 1);   // head: sum-exp and target logit
  add(CommOp::kReduceScatter, local_nc, 1);  // head: ln_f's output grad
  add(CommOp::kAllReduce, 2 * c * e, 1);     // head: ln_f's grads
  return s;
}

// Bytes each rank sends on dp per step: a reduce-scatter of every unit's
// gradient and an all-gather of its parameters (stages 0-2: after the
// update; stage 3: before forward and before backward, except the head and
// the embedding it reads, which stay gathered across the turnaround).
// `unit_numels`: the rank's units in order, embed first and head last.
int64_t DpCommTheory(int stage, const std::vector<int64_t>& unit_numels, int dp) {
  int64_t shard = 0;
  for (int64_t n : unit_numels) shard += ShardNumel(n, dp);
  const int64_t turnaround = ShardNumel(unit_numels.front(), dp) + ShardNumel(unit_numels.back(), dp);
  return (stage == 3 ? 3 * shard - turnaround : 2 * shard) * int64_t{dp - 1} * kF32;
}

// ---------------------------------------------------------------------------
// Measurement

// "yes" when every rank measured what rank 0 did.
std::string SameOnAllRanks(const std::vector<std::vector<int64_t>>& all) {
  for (const auto& rank : all) {
    if (rank != all[0]) return "no";
  }
  return "yes";
}

class Grids {
 public:
  ProcessGrid& Get(int dp, int tp) {
    std::unique_ptr<ProcessGrid>& g = grids_[{dp, tp}];
    if (g == nullptr) {
      CommOptions options;
      options.timeout = absl::Minutes(10);
      auto world = CreateMpiWorld(options);
      Check(world.status(), "CreateMpiWorld");
      auto grid = ProcessGrid::Create(std::move(world).value(), {dp, tp, 1});
      Check(grid.status(), "ProcessGrid::Create");
      g = std::make_unique<ProcessGrid>(std::move(grid).value());
    }
    return *g;
  }
  void Clear() { grids_.clear(); }

 private:
  std::map<std::pair<int, int>, std::unique_ptr<ProcessGrid>> grids_;
};

struct Bench {
  Grids grids;
  ProcessGrid* world_grid = nullptr;  // (N, 1): the world communicator the tables gather on
  std::vector<int32_t> tokens;
  bool root = false;
};

EngineConfig Config(const Layout& l, int stage) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_parallel()->set_dp(l.dp);
  c.mutable_parallel()->set_tp(l.tp);
  c.mutable_parallel()->set_sequence_parallel(l.sp);
  c.mutable_parallel()->set_keep_gathered_ln_outputs(l.keep);
  c.mutable_optimizer()->set_lr(6e-4);
  c.mutable_device()->set_threads_per_rank(kernels::CpuThreads());
  return c;
}

// An engine of one layout and its rank's micro-batch.
struct Run {
  Layout layout;
  ProcessGrid* grid = nullptr;
  std::unique_ptr<Engine> engine;
  std::vector<HostBatch> batches;
  std::vector<Batch> views;
};

Run Start(Bench& bench, const Layout& l, int stage) {
  Run run;
  run.layout = l;
  run.grid = &bench.grids.Get(l.dp, l.tp);
  auto model = BuildGpt2(Model(l.tp));
  Check(model.status(), "BuildGpt2");
  auto engine = Engine::Create(Config(l, stage), run.grid, std::move(model).value());
  Check(engine.status(), "Engine::Create");
  run.engine = std::move(engine).value();
  run.batches = MicroBatchesForRank(bench.tokens, absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_seq), l.dp, 1,
                                    run.grid->dp_rank());
  run.views = Views(run.batches);
  return run;
}

// The engine's flat-buffer layouts, against the analytical unit sizes.
bool LayoutsMatchTheory(const Engine& engine, const std::vector<int64_t>& numels, int dp) {
  if (engine.num_units() != static_cast<int>(numels.size())) return false;
  for (int u = 0; u < engine.num_units(); ++u) {
    const FlatParamLayout& layout = engine.layout(u);
    if (layout.numel() != numels[u] || layout.shard_numel() != ShardNumel(numels[u], dp)) return false;
  }
  return true;
}

std::vector<Layout> Layouts(int world, int heads, bool with_sp) {
  std::vector<Layout> out;
  for (int tp = 1; tp <= world; ++tp) {
    if (world % tp != 0 || heads % tp != 0) continue;
    out.push_back({world / tp, tp, false});
    if (with_sp && tp > 1) {
      out.push_back({world / tp, tp, true});
      out.push_back({world / tp, tp, true, true});
    }
  }
  return out;
}

void ModelStateTable(Bench& bench, const std::vector<Layout>& layouts) {
  std::vector<std::string> state_rows, dp_rows;
  for (const Layout& l : layouts) {
    const Gpt2Config m = Model(l.tp);
    const std::vector<int64_t> numels = LocalUnitNumels(m, l.tp);
    const auto [split, replicated] = SplitAndReplicated(m);
    int64_t local = 0, full = 0, shard = 0;
    for (int64_t n : numels) {
      local += n;
      shard += ShardNumel(n, l.dp);
    }
    full = shard * l.dp;
    for (int stage = 0; stage <= 3; ++stage) {
      Run run = Start(bench, l, stage);
      const bool layouts_ok = LayoutsMatchTheory(*run.engine, numels, l.dp);
      const CommStats before = run.grid->dp().Stats();
      Check(run.engine->TrainStep(run.views).status(), "TrainStep");
      const CommStats dp = run.grid->dp().Stats() - before;
      const MemoryTracker& t = run.engine->memory();
      StateBytes got;
      got.params = t.Usage(MemoryCategory::kParams).current;
      got.grads = t.Usage(MemoryCategory::kGrads).current;
      got.master = t.Usage(MemoryCategory::kMasterParams).current;
      got.optimizer = t.Usage(MemoryCategory::kOptimizerState).current;
      const int64_t dp_bytes = dp[CommOp::kAllGather].bytes_sent + dp[CommOp::kReduceScatter].bytes_sent;
      const auto all = AllRanks(bench.world_grid->world(),
                                {got.params, got.grads, got.master, got.optimizer, dp_bytes, layouts_ok ? 1 : 0});
      const StateBytes want = bench::ZeroStateBytes(stage, full, shard);
      const double unpadded = bench::ZeroStateTheory(stage, static_cast<double>(local), l.dp);
      const bool per_category = got.params == want.params && got.grads == want.grads &&
                                got.master == want.master && got.optimizer == want.optimizer;
      bool engine_layouts = true;
      for (const auto& rank : all) engine_layouts &= rank[5] == 1;
      state_rows.push_back(absl::StrFormat(
          "| %d | %d | %d | %d + %d / %d = %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", l.dp,
          l.tp, stage, replicated, split, l.tp, local, full, Mb(got.params), Mb(got.grads), Mb(got.master),
          Mb(got.optimizer), Mb(got.total()), Mb(unpadded), Mb(want.total()),
          Ratio(got.total(), want.total()), per_category ? "yes" : "no", engine_layouts ? "yes" : "no",
          SameOnAllRanks(all)));
      const int64_t dp_want = DpCommTheory(stage, numels, l.dp);
      dp_rows.push_back(absl::StrFormat("| %d | %d | %d | %s | %s | %s | %lld B |", l.dp, l.tp, stage, Mb(dp_bytes),
                                        Mb(dp_want), Ratio(dp_bytes, dp_want),
                                        static_cast<long long>(dp[CommOp::kAllReduce].bytes_sent)));
    }
  }
  if (!bench.root) return;
  std::printf("\n## Model-state bytes per rank, %s, f32, after one step\n\n", ModelName().c_str());
  std::printf("Theory: the ZeRO formulas over Ψ_local = Ψ_rep + Ψ_split / tp elements per rank (Ψ_split counts wte "
              "with Vp = V rounded up to a multiple of tp rows); P = Σ units' padded flat buffers (dp × S, S the "
              "shard rounded up to %lld elements): stage 0: 20P, 1: 8P + 12S, 2: 4P + 16S, 3: 20S bytes "
              "(S = P / dp). \"theory (Ψ)\" is the same without the alignment padding.\n\n",
              static_cast<long long>(kDefaultShardAlignment));
  std::printf("| dp | tp | stage | Ψ_rep + Ψ_split / tp = Ψ_local | P | params | grads | master | optimizer | "
              "total measured | theory (Ψ) | theory (P) | measured / theory (P) | every category exact | "
              "engine layout = theory | same on all ranks |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& row : state_rows) std::printf("%s\n", row.c_str());
  std::printf("\n## dp bytes sent per rank per step (all-gather + reduce-scatter on the dp communicator)\n\n"
              "Theory: 2S (stages 0-2) or 3S − S_turn (stage 3; S_turn the head's and the embedding's shards, gathered "
              "once for both passes) × (dp − 1) × 4 bytes. The last column is the dp "
              "communicator's all-reduces (the step's scalars go over the world communicator when tp > 1).\n\n");
  std::printf("| dp | tp | stage | measured | theory | measured / theory | dp all-reduce |\n"
              "|---|---|---|---|---|---|---|\n");
  for (const std::string& row : dp_rows) std::printf("%s\n", row.c_str());
}

std::string OpCell(const OpCounters& got, const OpCounters& want) {
  if (got.calls == 0 && want.calls == 0) return "0";
  return absl::StrFormat("%lld / %lld; %s / %s (%s)", static_cast<long long>(got.calls),
                         static_cast<long long>(want.calls), Mb(got.bytes_sent), Mb(want.bytes_sent),
                         Ratio(got.bytes_sent, want.bytes_sent));
}

void TimeActivationsAndComm(Bench& bench, const std::vector<Layout>& layouts) {
  const int stage = absl::GetFlag(FLAGS_stage);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::vector<Run> runs;
  for (const Layout& l : layouts) {
    runs.push_back(Start(bench, l, stage));
    Check(runs.back().engine->TrainStep(runs.back().views).status(), "warm-up TrainStep");
  }
  const size_t k = runs.size();
  std::vector<std::vector<double>> total(k), forward(k), backward(k), optimizer(k), waits(k);
  std::vector<int64_t> peak(k), dp_bytes(k);
  std::vector<CommStats> tp(k);
  for (int rep = 0; rep < repeats; ++rep) {
    for (size_t i = 0; i < k; ++i) {
      Run& run = runs[i];
      if (rep == 0) run.engine->memory().ResetPeaks();
      const CommStats tp_before = run.grid->tp().Stats(), dp_before = run.grid->dp().Stats();
      absl::StatusOr<StepResult> r = run.engine->TrainStep(run.views);
      Check(r.status(), "TrainStep");
      if (rep == 0) {
        tp[i] = run.grid->tp().Stats() - tp_before;
        const CommStats dp = run.grid->dp().Stats() - dp_before;
        dp_bytes[i] = dp[CommOp::kAllGather].bytes_sent + dp[CommOp::kReduceScatter].bytes_sent;
        peak[i] = run.engine->memory().Usage(MemoryCategory::kActivations).peak;
      }
      total[i].push_back(r->timings.total);
      forward[i].push_back(r->timings.forward);
      backward[i].push_back(r->timings.backward);
      optimizer[i].push_back(r->timings.optimizer);
      waits[i].push_back(r->timings.reduce_wait + r->timings.gather_wait + r->timings.publish_wait);
    }
  }
  // Bytes and peaks are checked on every rank; times are rank 0's.
  std::vector<int64_t> mine;
  for (size_t i = 0; i < k; ++i) {
    mine.push_back(peak[i]);
    mine.push_back(dp_bytes[i]);
    for (CommOp op : {CommOp::kAllReduce, CommOp::kAllGather, CommOp::kReduceScatter}) {
      mine.push_back(tp[i][op].calls);
      mine.push_back(tp[i][op].bytes_sent);
    }
  }
  const std::string same = SameOnAllRanks(AllRanks(bench.world_grid->world(), mine));
  if (!bench.root) return;
  const Gpt2Config m = Model(1);
  const int world = bench.world_grid->world().size();
  const int64_t tokens = int64_t{absl::GetFlag(FLAGS_batch)} * m.seq_len;
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("\n## Step time, %s, %d x %d tokens per step, ZeRO %d, f32, %d ranks, %d threads per rank, %u "
              "cores; median of %d interleaved steps\n\n",
              ModelName().c_str(), absl::GetFlag(FLAGS_batch), m.seq_len, stage, world, kernels::CpuThreads(), cores,
              repeats);
  std::printf("Forward and backward include the tp collectives (each unit waits for its own); \"dp and step "
              "waits\" is the time blocked for the dp gradient reduce-scatters, stage-3 gathers and the optimizer "
              "phase's collectives (the norm all-reduce over the world, the parameter all-gathers).\n\n");
  std::printf("| layout | sequence parallel | step time | vs dp %d | forward | backward | optimizer | dp and step "
              "waits | tokens/s |\n|---|---|---|---|---|---|---|---|---|\n",
              world);
  const double base = Median(total[0]);
  for (size_t i = 0; i < k; ++i) {
    const double t = Median(total[i]);
    std::printf("| %s | %s | %.1f ms | %.3f | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.0f |\n",
                runs[i].layout.Name().c_str(), runs[i].layout.Sp().c_str(), t * 1e3, t / base,
                Median(forward[i]) * 1e3, Median(backward[i]) * 1e3, Median(optimizer[i]) * 1e3,
                Median(waits[i]) * 1e3, tokens / t);
  }

  std::printf("\n## Peak activation bytes per rank in one step (kActivations), ZeRO %d\n\n", stage);
  std::printf("Theory (docs/model.md, f32 e = 4, N = B·T tokens per rank, rows = N/tp with sequence parallelism, "
              "else N): per block 4·rows·C·e + 16·rows (LayerNorm/residual region: x, ln_1, res2, ln_2 and their "
              "statistics; (2·rows + 2·N)·C·e + 16·rows with the gathered LN outputs kept) + 12·N·C/tp·e + "
              "4·B·(NH/tp)·T (tensor-parallel region: qkv, attention output, c_fc, "
              "GELU, attention log-sum-exp); the head rows·C·e + N·C·e + 8·rows + N·(Vp/tp)·e + 4·N (input rows, "
              "ln_f output on all rows, ln_f statistics, local logits, lse); the peak is at the head's forward, "
              "with its input (the last block's output, rows·C·e) still held. Same on all ranks: %s.\n\n",
              same.c_str());
  std::printf("| layout | sequence parallel | B x T per rank | rows | LN/residual (theory) | tp region (theory) | "
              "head (theory) | theory | measured | measured / theory |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < k; ++i) {
    const Layout& l = runs[i].layout;
    const ActivationTheory a = ActivationsOf(Model(l.tp), l);
    const Rows r = RowsOf(l);
    std::printf("| %s | %s | %lld x %lld | %lld | %s | %s | %s | %s | %s | %s |\n", l.Name().c_str(), l.Sp().c_str(),
                static_cast<long long>(r.b), static_cast<long long>(r.t), static_cast<long long>(r.local),
                Mb(a.ln_residual).c_str(), Mb(a.tp_region).c_str(), Mb(a.head).c_str(), Mb(a.total()).c_str(),
                Mb(peak[i]).c_str(), Ratio(peak[i], a.total()).c_str());
  }
  std::printf("\nWhat sequence parallelism saves at the same layout: theory (1 − 1/tp)·(L·(4·N·C·e + 16·N) + "
              "2·N·C·e + 8·N) (the blocks' LayerNorm/residual region, the head's input rows, its ln_f statistics "
              "and the held input).\n\n");
  std::printf("| layout | peak, SP off | peak, SP on | on / off | LN/residual region on / off (theory) | saved "
              "(measured) | saved (theory) | measured / theory |\n|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < k; ++i) {
    const Layout& l = runs[i].layout;
    if (!l.sp) continue;
    size_t off = k;
    for (size_t j = 0; j < k; ++j) {
      if (runs[j].layout.dp == l.dp && runs[j].layout.tp == l.tp && !runs[j].layout.sp) off = j;
    }
    if (off == k) continue;
    Layout without = l;
    without.sp = without.keep = false;
    const ActivationTheory on = ActivationsOf(Model(l.tp), l), offt = ActivationsOf(Model(l.tp), without);
    const int64_t saved = peak[off] - peak[i], saved_theory = offt.total() - on.total();
    std::printf("| %s | %s | %s | %.4f | %.4f | %s | %s | %s |\n", l.Name().c_str(), Mb(peak[off]).c_str(),
                Mb(peak[i]).c_str(), static_cast<double>(peak[i]) / peak[off],
                static_cast<double>(on.ln_residual) / offt.ln_residual, Mb(saved).c_str(), Mb(saved_theory).c_str(),
                Ratio(saved, saved_theory).c_str());
  }

  std::printf("\n## tp communicator per rank per step, ZeRO %d\n\n", stage);
  std::printf("Each cell: calls measured / theory; bytes sent measured / theory (ratio), comm/comm_stats.h's ring "
              "convention: all-reduce 2(tp−1)/tp·B, all-gather and reduce-scatter (tp−1)·B per rank, B the "
              "per-rank buffer. Theory (docs/model.md), per block: without sequence parallelism 2 all-reduces of "
              "N·C forward and 2 backward; with it 2 all-gathers and 2 reduce-scatters of N·C/tp forward, 4 "
              "all-gathers (2 with the gathered LN outputs kept), 2 reduce-scatters of N·C/tp and one all-reduce of "
              "4C backward. Embed and head "
              "(vocabulary parallel): without, all-reduces of the embed output (N·C), the row max (N), sum-exp "
              "and target logit (2N) and ln_f's output grad (N·C); with, the embed output reduce-scattered and "
              "its grad all-gathered, ln_f's output all-gathered, the same two f32 all-reduces, ln_f's output "
              "grad reduce-scattered and ln_f's grads (2C) all-reduced. dp: all-gather + reduce-scatter bytes "
              "vs docs/sharding.md. Same on all ranks: %s.\n\n",
              same.c_str());
  std::printf("| layout | sequence parallel | AllReduce | AllGather | ReduceScatter | tp total measured / theory | "
              "dp measured / theory |\n|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < k; ++i) {
    const Layout& l = runs[i].layout;
    const Gpt2Config model = Model(l.tp);
    const CommStats want = TpCommTheory(model, l);
    const int64_t dp_want = DpCommTheory(stage, LocalUnitNumels(model, l.tp), l.dp);
    const CommStats& got = tp[i];
    int64_t got_total = 0, want_total = 0;
    for (CommOp op : {CommOp::kAllReduce, CommOp::kAllGather, CommOp::kReduceScatter}) {
      got_total += got[op].bytes_sent;
      want_total += want[op].bytes_sent;
    }
    std::printf("| %s | %s | %s | %s | %s | %s / %s (%s) | %s / %s (%s) |\n", l.Name().c_str(), l.Sp().c_str(),
                OpCell(got[CommOp::kAllReduce], want[CommOp::kAllReduce]).c_str(),
                OpCell(got[CommOp::kAllGather], want[CommOp::kAllGather]).c_str(),
                OpCell(got[CommOp::kReduceScatter], want[CommOp::kReduceScatter]).c_str(), Mb(got_total).c_str(),
                Mb(want_total).c_str(), Ratio(got_total, want_total).c_str(), Mb(dp_bytes[i]).c_str(),
                Mb(dp_want).c_str(), Ratio(dp_bytes[i], dp_want).c_str());
  }
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  kernels::SetCpuThreads(kernels::DefaultCpuThreads());
  Bench bench;
  CommOptions options;
  options.timeout = absl::Minutes(10);
  auto probe = CreateMpiWorld(options);
  Check(probe.status(), "CreateMpiWorld");
  const int world = (*probe)->size();
  probe->reset();
  const int batch = absl::GetFlag(FLAGS_batch);
  if (batch % world != 0) {
    std::fprintf(stderr, "tp_bench: --batch %d is not a multiple of the %d ranks\n", batch, world);
    return 2;
  }
  bench.world_grid = &bench.grids.Get(world, 1);
  bench.root = bench.world_grid->world().rank() == 0;
  const Gpt2Config m = Model(1);
  bench.tokens = RandomTokens(11, batch, m.seq_len, m.vocab_size);
  if (absl::GetFlag(FLAGS_time)) TimeActivationsAndComm(bench, Layouts(world, m.n_head, /*with_sp=*/true));
  if (absl::GetFlag(FLAGS_memory)) ModelStateTable(bench, Layouts(world, m.n_head, /*with_sp=*/false));
  std::fflush(stdout);
  bench.grids.Clear();  // the communicators go before MPI finalises
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  const int code = zeroshard::Main(argc, argv);
  zeroshard::FinalizeMpi();
  return code;
}

// The NVMe tier under mpirun (docs/offload_streaming.md): optimizer state
// and master weights streamed through the step program's LOAD/STORE
// actions train to bitwise the same parameters, masters and optimizer
// state as the same run with everything resident — ZeRO 0-3 over 3 ranks
// (an odd world: shards that do not divide the units), AdamW and Lion,
// dp 1 x pp 2 over 2 ranks; at stage 3 also the parameter shards on NVMe
// (every class, over 3 ranks, dp 2 and dp 1 x pp 2, evaluation included);
// the gradient shards at stages 2-3 over 3 ranks, dp 1 x pp 2 and hybrid
// sharding over 4 ranks (shard groups of 2) —
// checkpoints saved offloaded resume exactly (offloaded or not), and I/O
// faults (a truncated file, a failed read, a full disk at creation and
// during a store) fail on every rank with a named error; the directory
// removed between steps changes nothing.
//
// GPT-2 tiny (engine/testing/tiny_gpt2.h); buffer_bytes 12288 makes chunks
// of 1024 elements, so the larger units stream in several chunks through 2
// slots, the last chunk of each region shorter.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/engine_checkpoint.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/state_view.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/tiny_gpt2.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"
#include "offload/async_io.h"
#include "offload/async_io_testing.h"
#include "offload/loop_filesystem_testing.h"

namespace zeroshard {
namespace {

constexpr int kSteps = 4;
constexpr uint64_t kSeed = 11;

struct Offload {
  bool state = false;
  bool master = false;
  bool params = false;  // stage 3
  bool grads = false;   // stages 2-3
};

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

// overflow: f16 compute under a dynamic loss scale that starts far too
// high and backs off steeply, so the first steps overflow and are skipped.
// shard_group > 0: hybrid sharding (engine.zero.shard_group_size).
EngineConfig Config(int stage, int dp, int pp, Offload off, bool lion = false, bool overflow = false,
                    int accumulation = 1, int shard_group = 0) {
  EngineConfig c;
  if (accumulation > 1) c.set_gradient_accumulation_steps(accumulation);
  if (overflow) {
    c.mutable_precision()->set_compute_dtype(F16);
    LossScaleConfig* ls = c.mutable_precision()->mutable_loss_scale();
    ls->set_type(LossScaleConfig::DYNAMIC);
    ls->set_initial_scale(1e9);
    ls->set_backoff_factor(1e-4);
  }
  c.mutable_zero()->set_stage(stage);
  c.mutable_zero()->set_bucket_bytes(8192);
  if (shard_group > 0) c.mutable_zero()->set_shard_group_size(shard_group);
  c.mutable_parallel()->set_dp(dp);
  c.mutable_parallel()->set_pp(pp);
  if (pp > 1 && accumulation == 1) c.set_gradient_accumulation_steps(2);
  if (lion) {
    c.mutable_optimizer()->set_type(OptimizerConfig::LION);
    c.mutable_optimizer()->set_lr(1e-4);
  } else {
    c.mutable_optimizer()->set_lr(1e-3);
    c.mutable_optimizer()->set_eps(1e-6);
  }
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_optimizer()->set_grad_clip(1.0);
  c.mutable_lr_schedule()->set_type(LrScheduleConfig::WARMUP_COSINE);
  c.mutable_lr_schedule()->set_warmup_steps(2);
  c.mutable_lr_schedule()->set_decay_steps(2 * kSteps);
  c.mutable_lr_schedule()->set_min_lr(1e-5);
  c.mutable_device()->set_threads_per_rank(1);
  c.set_seed(kSeed);
  OffloadConfig& o = *c.mutable_offload();
  if (off.state) o.set_optimizer_state(NVME);
  if (off.master) o.set_master_weights(NVME);
  if (off.params) o.set_params(NVME);
  if (off.grads) o.set_grads(NVME);
  o.set_nvme_dir(TmpDir());
  o.set_buffer_count(2);
  o.set_buffer_bytes(off.grads ? 16384 : 12288);  // AdamW with grads: 16 bytes an element
  o.set_queue_depth(4);
  return c;
}

TrainConfig AsTrainConfig(const EngineConfig& e) {
  TrainConfig t;
  const Gpt2Config m = TinyGpt2();
  t.mutable_model()->set_n_layer(m.n_layer);
  t.mutable_model()->set_n_head(m.n_head);
  t.mutable_model()->set_n_embd(m.n_embd);
  t.mutable_model()->set_vocab_size(m.vocab_size);
  t.mutable_model()->set_seq_len(m.seq_len);
  *t.mutable_engine() = e;
  return t;
}

// Every present kind of every unit of this rank, as bytes.
std::vector<std::vector<char>> State(const Engine& engine) {
  const EngineStateView& view = engine.state();
  std::vector<std::vector<char>> out;
  for (int u = 0; u < view.num_units(); ++u) {
    for (int k = 0; k < view.num_kinds(); ++k) {
      const StateRegion r = view.region(u, k);
      std::vector<char> bytes(static_cast<size_t>(r.bytes));
      if (r.present && r.length > 0) {
        absl::Status s = view.Read(u, k, 0, r.length, bytes.data());
        EXPECT_TRUE(s.ok()) << s;
      }
      out.push_back(std::move(bytes));
    }
  }
  return out;
}

void ExpectSameState(const Engine& a, const Engine& b, const std::string& what) {
  const std::vector<std::vector<char>> x = State(a), y = State(b);
  ASSERT_EQ(x.size(), y.size());
  const int kinds = a.state().num_kinds();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(x[i] == y[i]) << what << ": unit " << i / kinds << " kind '" << a.state().kinds()[i % kinds].name
                              << "' differs";
  }
}

struct TrainRun {
  std::unique_ptr<Engine> engine;
  std::vector<HostBatch> batches;
  std::vector<StepResult> results;

  absl::Status Steps(int n) {
    const std::vector<Batch> views = Views(batches);
    for (int s = 0; s < n; ++s) {
      absl::StatusOr<StepResult> r = engine->TrainStep(views);
      if (!r.ok()) return r.status();
      results.push_back(*r);
    }
    return absl::OkStatus();
  }
};

TrainRun MakeRun(const EngineConfig& config, ProcessGrid& grid) {
  TrainRun run;
  auto model = BuildGpt2(TinyGpt2());
  EXPECT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(config, &grid, std::move(model).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  run.engine = std::move(*engine);
  const int dp = config.parallel().dp(), k = config.gradient_accumulation_steps();
  const int rows = 6 * dp * k;
  const std::vector<int32_t> tokens = RandomTokens(5, rows, TinyGpt2().seq_len, TinyGpt2().vocab_size);
  run.batches = MicroBatchesForRank(tokens, rows, TinyGpt2().seq_len, dp, k, grid.dp_rank());
  return run;
}

// Offloaded and resident runs of the same config: every step's loss and
// norm, and at the end every kind of every unit, bitwise equal; the
// offloaded run read and wrote every step.
void ExpectOffloadExact(int stage, int dp, int pp, Offload off, bool lion, const std::string& what,
                        bool overflow = false, int accumulation = 1, int shard_group = 0) {
  SCOPED_TRACE(what);
  ProcessGrid& grid = CachedGrid({dp, 1, pp, shard_group});
  TrainRun resident = MakeRun(Config(stage, dp, pp, Offload(), lion, overflow, accumulation, shard_group), grid);
  TrainRun streamed = MakeRun(Config(stage, dp, pp, off, lion, overflow, accumulation, shard_group), grid);
  ASSERT_NE(resident.engine, nullptr);
  ASSERT_NE(streamed.engine, nullptr);
  if (off.state || off.master || off.grads) {
    ASSERT_FALSE(streamed.engine->train_program().chunks.empty());
  }
  if (off.params) {
    ASSERT_GT(streamed.engine->train_program().param_slots, 0);
  }
  ExpectSameState(*resident.engine, *streamed.engine, "after Create");
  ASSERT_TRUE(resident.Steps(kSteps).ok());
  absl::Status s = streamed.Steps(kSteps);
  ASSERT_TRUE(s.ok()) << s;
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(std::memcmp(&resident.results[i].loss, &streamed.results[i].loss, sizeof(float)), 0) << "step " << i;
    EXPECT_EQ(std::memcmp(&resident.results[i].grad_norm, &streamed.results[i].grad_norm, sizeof(float)), 0);
    EXPECT_GT(streamed.results[i].io.read_bytes, 0) << "step " << i;
    EXPECT_GT(streamed.results[i].io.write_bytes, 0) << "step " << i;
    EXPECT_EQ(resident.results[i].io.read_bytes, 0);
    EXPECT_EQ(resident.results[i].skipped, streamed.results[i].skipped) << "step " << i;
  }
  if (overflow) {
    EXPECT_TRUE(streamed.results[0].skipped);
    EXPECT_FALSE(streamed.results[kSteps - 1].skipped);
  }
  ExpectSameState(*resident.engine, *streamed.engine, absl::StrCat("after ", kSteps, " steps"));
  if (off.params && !off.state && !off.master) {
    // Exactly the program's shard I/O: each LOAD reads, each STORE writes
    // the unit's f32 shard rounded up to the I/O alignment. Every load is
    // waited in its step (step 0 also counts the state view's reads after
    // Create); stores drain into the next, so writes are counted in all,
    // after the initial one of every shard.
    const StepProgram& program = streamed.engine->train_program();
    int64_t reads = 0, writes = 0, initial = 0;
    for (const Action& a : program.actions) {
      if (a.param_slot < 0) continue;
      const int64_t bytes = AlignIo(streamed.engine->plan().layouts[a.unit].shard_numel() * 4);
      if (a.kind == ActionKind::kLoad) reads += bytes;
      if (a.kind == ActionKind::kStore) writes += bytes;
    }
    for (const FlatParamLayout& layout : streamed.engine->plan().layouts) initial += AlignIo(layout.shard_numel() * 4);
    ASSERT_GT(reads, 0);
    for (int i = 1; i < kSteps; ++i) EXPECT_EQ(streamed.results[i].io.read_bytes, reads) << "step " << i;
    ParamShardStore* store = dynamic_cast<EngineImpl&>(*streamed.engine).param_shard_store();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Drain().ok());
    EXPECT_EQ(store->io().stats().write_bytes, initial + kSteps * writes);
  }
  if (off.params) {
    // The evaluation gathers the shards from the file too.
    const std::vector<Batch> views = Views(resident.batches);
    absl::StatusOr<EvalResult> a = resident.engine->Evaluate(views[0]);
    absl::StatusOr<EvalResult> b = streamed.engine->Evaluate(views[0]);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(std::memcmp(&a->loss, &b->loss, sizeof(a->loss)), 0) << a->loss << " vs " << b->loss;
    // At rest (every unit released) no parameter is resident.
    EXPECT_EQ(streamed.engine->memory().Usage(MemoryCategory::kParams).current, 0);
  }
  if (off.grads && !off.state && !off.master && !off.params) {
    // Exactly the gradients' I/O: each chunk's grads piece read once a step
    // and written back by its STORE; each WAIT_REDUCE writes its bucket's
    // reduced shards, and one after the bucket's first of the step (the
    // next micro-batch's) reads them back first; a pipeline's TIED_REDUCE
    // reads its unit's shard and writes it again; all rounded up to the I/O
    // alignment. Step 0 also counts the state view's reads after Create;
    // stores drain into the next step, so writes are counted in all.
    const StepProgram& program = streamed.engine->train_program();
    const EngineStateView& view = streamed.engine->state();
    int64_t pieces = 0, reduced_reads = 0, reduced_writes = 0;
    for (const OffloadChunk& c : program.chunks) pieces += AlignIo(c.length * 4);
    std::vector<bool> reduced(streamed.engine->plan().buckets.size(), false);
    for (const Action& a : program.actions) {
      if (a.kind != ActionKind::kWaitReduce) continue;
      int64_t bytes = 0;
      for (int u : streamed.engine->plan().buckets[a.bucket].units) {
        const StateRegion r = view.region(u, EngineStateView::kFirstOptimizerKind);
        if (r.present) bytes += AlignIo(r.length * 4);
      }
      reduced_writes += bytes;
      if (reduced[a.bucket]) reduced_reads += bytes;
      reduced[a.bucket] = true;
    }
    ASSERT_GT(pieces, 0);
    // A pipeline reduces each bucket once a step (the micro-batches add up
    // in the full gradients first): nothing is read back at a WAIT_REDUCE.
    if (accumulation > 1 && pp == 1) {
      EXPECT_GT(reduced_reads, 0);
    }
    if (pp > 1) {
      EXPECT_EQ(reduced_reads, 0);
    }
    int ties = 0;
    for (const Action& a : program.actions) {
      if (a.kind != ActionKind::kTiedReduce) continue;
      const int64_t bytes = AlignIo(view.region(a.unit, EngineStateView::kFirstOptimizerKind).length * 4);
      reduced_reads += bytes;
      reduced_writes += bytes;
      ++ties;
    }
    // GPT-2's wte on both ends of the pipeline.
    EXPECT_EQ(ties, pp > 1 ? 1 : 0);
    for (int i = 1; i < kSteps; ++i) {
      EXPECT_EQ(streamed.results[i].io.read_bytes, pieces + reduced_reads) << "step " << i;
    }
    OffloadStore* store = dynamic_cast<EngineImpl&>(*streamed.engine).offload_store();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Drain().ok());
    EXPECT_EQ(store->io().stats().write_bytes, kSteps * (pieces + reduced_writes));
  }
  if (off.grads) {
    // At rest no gradient shard is resident but a tied mirror's (it has no
    // optimizer region to stream with).
    int64_t mirrors = 0;
    for (int u = 0; u < streamed.engine->num_units(); ++u) {
      if (streamed.engine->plan().units[u].mirror) mirrors += streamed.engine->layout(u).shard_numel() * 4;
    }
    EXPECT_EQ(mirrors > 0, pp > 1 && streamed.engine->plan().stage == pp - 1);
    EXPECT_EQ(streamed.engine->memory().Usage(MemoryCategory::kGrads).current, mirrors);
    EXPECT_GT(resident.engine->memory().Usage(MemoryCategory::kGrads).current, 0);
  }
  if (off.state) {
    EXPECT_EQ(streamed.engine->memory().Usage(MemoryCategory::kOptimizerState).current, 0);
  }
  if (off.master) {
    EXPECT_EQ(streamed.engine->memory().Usage(MemoryCategory::kMasterParams).current, 0);
  }
  EXPECT_GT(streamed.engine->memory().Usage(MemoryCategory::kOffloadStaging).current, 0);
}

bool DataParallelWorld3() { return MpiWorldSize() == 3; }

TEST(OffloadMpiTest, OptimizerStateOnNvmeIsBitwiseEqualAtStages0To3) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  for (int stage = 0; stage <= 3; ++stage) {
    ExpectOffloadExact(stage, 3, 1, {true, false}, false, absl::StrCat("optimizer state, ZeRO ", stage));
  }
}

TEST(OffloadMpiTest, BothClassesOnNvmeAtStage3AdamWAndLion) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ExpectOffloadExact(3, 3, 1, {true, true}, false, "both, ZeRO 3, AdamW");
  ExpectOffloadExact(3, 3, 1, {true, true}, true, "both, ZeRO 3, Lion");
  ExpectOffloadExact(1, 3, 1, {false, true}, false, "master only, ZeRO 1");
}

TEST(OffloadMpiTest, EveryClassOnNvmeAtStage3AdamWAndLion) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ExpectOffloadExact(3, 3, 1, {true, true, true}, false, "every class, ZeRO 3, AdamW");
  ExpectOffloadExact(3, 3, 1, {true, true, true}, true, "every class, ZeRO 3, Lion");
  ExpectOffloadExact(3, 3, 1, {false, false, true}, false, "params only, ZeRO 3");
}

TEST(OffloadMpiTest, GradsOnNvmeAtStages2And3) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  for (int stage = 2; stage <= 3; ++stage) {
    ExpectOffloadExact(stage, 3, 1, {false, false, false, true}, false, absl::StrCat("grads only, ZeRO ", stage));
  }
  ExpectOffloadExact(2, 3, 1, {true, true, false, true}, true, "grads, master and state, ZeRO 2, Lion");
}

// Gradient accumulation: every micro-batch's reduction adds into the
// shard the earlier ones stored (read back first), as into a resident one.
TEST(OffloadMpiTest, GradsOnNvmeAccumulateMicroBatchesExactly) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ExpectOffloadExact(2, 3, 1, {false, false, false, true}, false, "grads only, ZeRO 2, 3 micro-batches", false, 3);
  ExpectOffloadExact(3, 3, 1, {true, true, true, true}, true, "every class and grads, ZeRO 3, Lion, 2 micro-batches",
                     false, 2);
}

// A skipped step (overflow) updates nothing: the stored gradients are read
// and written back, the norm and the skip decision come from the reduction.
TEST(OffloadMpiTest, GradsOnNvmeSkipOverflowedStepsExactly) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ExpectOffloadExact(2, 3, 1, {false, false, false, true}, false, "grads only, ZeRO 2, f16 overflow", true);
  ExpectOffloadExact(3, 3, 1, {true, true, true, true}, false, "every class and grads, ZeRO 3, f16 overflow", true);
}

TEST(OffloadMpiTest, EveryClassWithGradsOnNvmeAtStage3AdamWAndLion) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ExpectOffloadExact(3, 3, 1, {true, true, true, true}, false, "every class and grads, ZeRO 3, AdamW");
  ExpectOffloadExact(3, 3, 1, {true, true, true, true}, true, "every class and grads, ZeRO 3, Lion");
}

TEST(OffloadMpiTest, ParamsOnNvmeOverTwoRanks) {
  if (MpiWorldSize() != 2) GTEST_SKIP() << "runs on 2 ranks (dp 2, and dp 1 x pp 2)";
  ExpectOffloadExact(3, 2, 1, {false, false, true}, false, "params only, ZeRO 3, dp 2");
  ExpectOffloadExact(3, 2, 1, {true, true, true}, true, "every class, ZeRO 3, dp 2, Lion");
  ExpectOffloadExact(3, 1, 2, {true, true, true}, false, "every class, ZeRO 3, dp 1 x pp 2");
}

TEST(OffloadMpiTest, BothClassesOnNvmeUnderAPipeline) {
  if (MpiWorldSize() != 2) GTEST_SKIP() << "runs on 2 ranks (dp 1 x pp 2)";
  ExpectOffloadExact(1, 1, 2, {true, true}, false, "both, dp 1 x pp 2, ZeRO 1");
}

// Under a pipeline each stage stores its own units' shards once a step,
// after the bucket's one reduction (the micro-batches accumulate in the
// full gradients); the tied wte is read back, summed over both ends and
// stored at TIED_REDUCE.
TEST(OffloadMpiTest, GradsOnNvmeUnderAPipelineAccumulateExactly) {
  if (MpiWorldSize() != 2) GTEST_SKIP() << "runs on 2 ranks (dp 1 x pp 2)";
  ExpectOffloadExact(2, 1, 2, {false, false, false, true}, false, "grads, dp 1 x pp 2, ZeRO 2, 3 micro-batches",
                     false, 3);
  ExpectOffloadExact(3, 1, 2, {true, true, true, true}, true, "every class, Lion, dp 1 x pp 2, ZeRO 3");
}

// Hybrid sharding: a bucket's shards are stored once its replica all-reduce
// has landed, at the next bucket's WAIT_REDUCE.
TEST(OffloadMpiTest, GradsOnNvmeUnderHybridShardingExactly) {
  if (MpiWorldSize() != 4) GTEST_SKIP() << "runs on 4 ranks (dp 4, shard groups of 2)";
  ExpectOffloadExact(2, 4, 1, {false, false, false, true}, false, "grads, HSDP 2 x 2, ZeRO 2, 2 micro-batches",
                     false, 2, 2);
  ExpectOffloadExact(3, 4, 1, {true, true, false, true}, false, "grads, state, masters, HSDP 2 x 2, ZeRO 3", false,
                     1, 2);
}

// A checkpoint saved with the gradient shards offloaded under a pipeline
// resumes exactly, offloaded or resident.
TEST(OffloadMpiTest, ResumeUnderAPipelineFromACheckpointSavedWithGradsOffloaded) {
  if (MpiWorldSize() != 2) GTEST_SKIP() << "runs on 2 ranks (dp 1 x pp 2)";
  ProcessGrid& grid = CachedGrid({1, 1, 2});
  const EngineConfig streamed = Config(2, 1, 2, {true, true, false, true}), resident = Config(2, 1, 2, Offload());
  TrainRun whole = MakeRun(streamed, grid);
  ASSERT_NE(whole.engine, nullptr);
  ASSERT_TRUE(whole.Steps(2 * kSteps).ok());
  TrainRun first = MakeRun(streamed, grid);
  ASSERT_TRUE(first.Steps(kSteps).ok());
  const std::string root = absl::StrCat(TmpDir(), "/offload_grads_pipeline_resume");
  absl::Status saved = SaveCheckpoint(*first.engine, root, kSteps, Gpt2RunRecord(AsTrainConfig(streamed)), {0, 0});
  ASSERT_TRUE(saved.ok()) << saved;
  for (const auto& [config, what] : {std::pair<EngineConfig, const char*>{streamed, "offloaded"}, {resident, "resident"}}) {
    SCOPED_TRACE(what);
    TrainRun resumed = MakeRun(config, grid);
    ASSERT_NE(resumed.engine, nullptr);
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*resumed.engine, root);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_TRUE(resumed.Steps(kSteps).ok());
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_EQ(std::memcmp(&whole.results[kSteps + i].loss, &resumed.results[i].loss, sizeof(float)), 0) << i;
      EXPECT_EQ(std::memcmp(&whole.results[kSteps + i].grad_norm, &resumed.results[i].grad_norm, sizeof(float)), 0)
          << i;
      if (config.offload().grads() == NVME) {
        EXPECT_GT(resumed.results[i].io.read_bytes, 0) << i;
      }
    }
    ExpectSameState(*whole.engine, *resumed.engine, absl::StrCat("resumed ", what));
  }
}

TEST(OffloadMpiTest, FilesStartZeroedAndTheStateViewReadsAndWritesRanges) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  TrainRun run = MakeRun(Config(0, 3, 1, {true, true}), CachedGrid({3, 1, 1}));
  ASSERT_NE(run.engine, nullptr);
  EngineStateView& view = run.engine->state();
  const int exp_avg = view.FindKind("exp_avg");
  ASSERT_GE(exp_avg, 0);
  for (int u = 0; u < view.num_units(); ++u) {
    const StateRegion r = view.region(u, exp_avg);
    if (!r.present || r.length == 0) continue;
    EXPECT_EQ(view.data(u, exp_avg), nullptr);
    EXPECT_EQ(view.data(u, EngineStateView::kMaster), nullptr);
    std::vector<float> m(static_cast<size_t>(r.length), 1.0f);
    ASSERT_TRUE(view.Read(u, exp_avg, 0, r.length, m.data()).ok());
    for (float x : m) ASSERT_EQ(x, 0.0f) << "unit " << u;
    // An odd range across a 1024-element window.
    const int64_t off = std::min<int64_t>(1000, r.length / 3), n = std::min<int64_t>(100, r.length - off);
    std::vector<float> in(static_cast<size_t>(n)), back(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) in[i] = 0.5f + static_cast<float>(i);
    ASSERT_TRUE(view.Write(u, exp_avg, off, n, in.data()).ok());
    ASSERT_TRUE(view.Read(u, exp_avg, 0, r.length, m.data()).ok());
    for (int64_t i = 0; i < r.length; ++i) {
      ASSERT_EQ(m[i], i >= off && i < off + n ? in[i - off] : 0.0f) << "unit " << u << " element " << i;
    }
  }
}

TEST(OffloadMpiTest, ResumeFromACheckpointSavedOffloaded) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  const EngineConfig streamed = Config(2, 3, 1, {true, true}), resident = Config(2, 3, 1, Offload());
  TrainRun whole = MakeRun(streamed, grid);
  ASSERT_NE(whole.engine, nullptr);
  ASSERT_TRUE(whole.Steps(2 * kSteps).ok());
  TrainRun first = MakeRun(streamed, grid);
  ASSERT_TRUE(first.Steps(kSteps).ok());
  const std::string root = absl::StrCat(TmpDir(), "/offload_resume");
  absl::Status saved = SaveCheckpoint(*first.engine, root, kSteps, Gpt2RunRecord(AsTrainConfig(streamed)), {0, 0});
  ASSERT_TRUE(saved.ok()) << saved;
  for (const auto& [config, what] : {std::pair<EngineConfig, const char*>{streamed, "offloaded"}, {resident, "resident"}}) {
    SCOPED_TRACE(what);
    TrainRun resumed = MakeRun(config, grid);
    ASSERT_NE(resumed.engine, nullptr);
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*resumed.engine, root);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_TRUE(resumed.Steps(kSteps).ok());
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_EQ(std::memcmp(&whole.results[kSteps + i].loss, &resumed.results[i].loss, sizeof(float)), 0) << i;
    }
    ExpectSameState(*whole.engine, *resumed.engine, absl::StrCat("resumed ", what));
  }
}

TEST(OffloadMpiTest, ResumeFromACheckpointSavedWithParamsOffloaded) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  const EngineConfig streamed = Config(3, 3, 1, {false, true, true}), resident = Config(3, 3, 1, Offload());
  TrainRun whole = MakeRun(streamed, grid);
  ASSERT_NE(whole.engine, nullptr);
  ASSERT_TRUE(whole.Steps(2 * kSteps).ok());
  TrainRun first = MakeRun(streamed, grid);
  ASSERT_TRUE(first.Steps(kSteps).ok());
  const std::string root = absl::StrCat(TmpDir(), "/offload_params_resume");
  absl::Status saved = SaveCheckpoint(*first.engine, root, kSteps, Gpt2RunRecord(AsTrainConfig(streamed)), {0, 0});
  ASSERT_TRUE(saved.ok()) << saved;
  for (const auto& [config, what] : {std::pair<EngineConfig, const char*>{streamed, "offloaded"}, {resident, "resident"}}) {
    SCOPED_TRACE(what);
    TrainRun resumed = MakeRun(config, grid);
    ASSERT_NE(resumed.engine, nullptr);
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*resumed.engine, root);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_TRUE(resumed.Steps(kSteps).ok());
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_EQ(std::memcmp(&whole.results[kSteps + i].loss, &resumed.results[i].loss, sizeof(float)), 0) << i;
    }
    ExpectSameState(*whole.engine, *resumed.engine, absl::StrCat("resumed ", what));
  }
}

TEST(OffloadMpiTest, ResumeFromACheckpointSavedWithEveryClassAndGradsOffloaded) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  const EngineConfig streamed = Config(3, 3, 1, {true, true, true, true}), resident = Config(3, 3, 1, Offload());
  TrainRun whole = MakeRun(streamed, grid);
  ASSERT_NE(whole.engine, nullptr);
  ASSERT_TRUE(whole.Steps(2 * kSteps).ok());
  TrainRun first = MakeRun(streamed, grid);
  ASSERT_TRUE(first.Steps(kSteps).ok());
  const std::string root = absl::StrCat(TmpDir(), "/offload_grads_resume");
  absl::Status saved = SaveCheckpoint(*first.engine, root, kSteps, Gpt2RunRecord(AsTrainConfig(streamed)), {0, 0});
  ASSERT_TRUE(saved.ok()) << saved;
  for (const auto& [config, what] : {std::pair<EngineConfig, const char*>{streamed, "offloaded"}, {resident, "resident"}}) {
    SCOPED_TRACE(what);
    TrainRun resumed = MakeRun(config, grid);
    ASSERT_NE(resumed.engine, nullptr);
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*resumed.engine, root);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_TRUE(resumed.Steps(kSteps).ok());
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_EQ(std::memcmp(&whole.results[kSteps + i].loss, &resumed.results[i].loss, sizeof(float)), 0) << i;
      EXPECT_EQ(std::memcmp(&whole.results[kSteps + i].grad_norm, &resumed.results[i].grad_norm, sizeof(float)), 0)
          << i;
    }
    ExpectSameState(*whole.engine, *resumed.engine, absl::StrCat("resumed ", what));
  }
}

// The state view reads and writes a parameter shard on the NVMe tier
// through its file: a range written is read back, the rest unchanged.
TEST(OffloadMpiTest, TheStateViewReadsAndWritesParamShardRanges) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  TrainRun run = MakeRun(Config(3, 3, 1, {false, false, true}), CachedGrid({3, 1, 1}));
  ASSERT_NE(run.engine, nullptr);
  EngineStateView& view = run.engine->state();
  const int k = EngineStateView::kParams;
  int checked = 0;
  for (int u = 0; u < view.num_units(); ++u) {
    const StateRegion r = view.region(u, k);
    if (!r.present || r.length < 4) continue;
    EXPECT_EQ(view.data(u, k), nullptr) << "unit " << u;
    const int64_t size = r.bytes / r.length;
    std::vector<char> before(static_cast<size_t>(r.bytes)), after(before.size());
    ASSERT_TRUE(view.Read(u, k, 0, r.length, before.data()).ok());
    const int64_t off = r.length / 3, n = r.length / 3;
    std::vector<char> in(static_cast<size_t>(n * size), 0x5a);
    ASSERT_TRUE(view.Write(u, k, off, n, in.data()).ok());
    ASSERT_TRUE(view.Read(u, k, 0, r.length, after.data()).ok());
    for (int64_t i = 0; i < r.bytes; ++i) {
      const bool written = i >= off * size && i < (off + n) * size;
      ASSERT_EQ(after[i], written ? 0x5a : before[i]) << "unit " << u << " byte " << i;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// Truncates, on dp rank 0, the anonymous file at `path` (its descriptor is
// the one whose /proc/self/fd link names it); every rank learns whether it
// worked.
int TruncateOnRank0(ProcessGrid& grid, const std::string& path) {
  int truncated = 0;
  if (grid.dp_rank() == 0) {
    for (int fd = 0; fd < 4096 && truncated == 0; ++fd) {
      char target[4096];
      const ssize_t n = ::readlink(absl::StrCat("/proc/self/fd/", fd).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      const std::string link = target;
      if (link == path || (absl::StartsWith(path, "/proc/self/fd/") && path == absl::StrCat("/proc/self/fd/", fd))) {
        truncated = ::ftruncate(fd, 0) == 0 ? 1 : 0;
      }
    }
  }
  EXPECT_TRUE(grid.control(GridAxis::kDp).AllReduce(&truncated, 1, DType::kI32, ReduceOp::kSum)->Wait().ok());
  return truncated;
}

TEST(OffloadMpiTest, ATruncatedParamsFileFailsTheNextStepOnEveryRank) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  TrainRun run = MakeRun(Config(3, 3, 1, {false, false, true}), grid);
  ASSERT_NE(run.engine, nullptr);
  ASSERT_TRUE(run.Steps(1).ok());
  ParamShardStore* store = dynamic_cast<EngineImpl&>(*run.engine).param_shard_store();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Drain().ok());
  ASSERT_EQ(TruncateOnRank0(grid, store->io().file_path(store->file())), 1)
      << "rank 0 could not truncate its params file";
  absl::Status s = run.Steps(1);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "NVMe offload I/O")) << s;
  if (grid.dp_rank() == 0) {
    EXPECT_TRUE(absl::StrContains(s.message(), "rank 0 params")) << s;
  }
  EXPECT_FALSE(run.Steps(1).ok());
}

TEST(OffloadMpiTest, ATruncatedFileFailsTheNextStepOnEveryRank) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  TrainRun run = MakeRun(Config(1, 3, 1, {true, false}), grid);
  ASSERT_NE(run.engine, nullptr);
  ASSERT_TRUE(run.Steps(2).ok());
  OffloadStore* store = dynamic_cast<EngineImpl&>(*run.engine).offload_store();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Drain().ok());
  int truncated = 0;
  if (grid.dp_rank() == 0) {
    // The file is anonymous: its descriptor is the one whose /proc/self/fd
    // link names file_path.
    const std::string path = store->io().file_path(store->state_file());
    for (int fd = 0; fd < 4096 && truncated == 0; ++fd) {
      char target[4096];
      const ssize_t n = ::readlink(absl::StrCat("/proc/self/fd/", fd).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      const std::string link = target;
      if (link == path || (absl::StartsWith(path, "/proc/self/fd/") && path == absl::StrCat("/proc/self/fd/", fd))) {
        truncated = ::ftruncate(fd, 0) == 0 ? 1 : 0;
      }
    }
  }
  ASSERT_TRUE(grid.control(GridAxis::kDp).AllReduce(&truncated, 1, DType::kI32, ReduceOp::kSum)->Wait().ok());
  ASSERT_EQ(truncated, 1) << "rank 0 could not truncate its optimizer_state file";
  absl::Status s = run.Steps(1);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "NVMe offload I/O")) << s;
  if (grid.dp_rank() == 0) {
    EXPECT_TRUE(absl::StrContains(s.message(), "optimizer_state")) << s;
  }
  // The engine is broken after a failed step, on every rank alike.
  EXPECT_FALSE(run.Steps(1).ok());
}

TEST(OffloadMpiTest, AFullDiskFailsAtCreationOnEveryRank) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  // Every rank its own 4 KiB tmpfs; where mounting is refused, every rank
  // skips (agreed, so that none is left in Create's collectives).
  // Under /tmp, not the test's directory: a mount left behind by a crash
  // must not sit inside the build tree.
  std::string dir = "/tmp/zs_offload_full_XXXXXX";
  const bool made = ::mkdtemp(dir.data()) != nullptr;
  const bool mounted = made && ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=4k") == 0;
  const std::string why = mounted ? "" : std::strerror(errno);
  int32_t failed = mounted ? 0 : 1;
  ASSERT_TRUE(grid.control(GridAxis::kDp).AllReduce(&failed, 1, DType::kI32, ReduceOp::kSum)->Wait().ok());
  if (failed != 0) {
    if (mounted) ::umount(dir.c_str());
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << (mounted ? "another rank" : why) << "; needs root)";
  }
  EngineConfig config = Config(1, 3, 1, {true, true});
  config.mutable_offload()->set_nvme_dir(dir);
  auto model = BuildGpt2(TinyGpt2());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(config, &grid, std::move(model).value());
  ::umount2(dir.c_str(), MNT_DETACH);
  ::rmdir(dir.c_str());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kResourceExhausted) << engine.status();
}

// The watchdog's bound on any collective in the fault tests: a rank left in
// one aborts the job (exit 70) instead of failing the test slowly.
constexpr double kFaultWatchdogSeconds = 20;

// What every rank's failed step must say when dp rank `rank`'s `op` (read
// or write) of its `file` failed with `errno_text`.
void ExpectAgreedIoError(const absl::Status& s, int rank, const std::string& action, const std::string& file,
                         const std::string& op, const std::string& errno_text) {
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              ::testing::StartsWith(absl::StrCat("the optimizer step's NVMe offload I/O failed on dp rank ", rank,
                                                 ": offload I/O (", action)))
      << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(absl::StrCat("offload file rank ", rank, " ", file, " (")))
      << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(absl::StrCat("): ", op, " of ")));
  EXPECT_THAT(std::string(s.message()), ::testing::EndsWith(absl::StrCat(": ", errno_text))) << s;
}

// The step after a fault: it fails at once on every rank too (the engine
// is broken), and the time the faulty step took is under the watchdog's.
TEST(OffloadMpiTest, AFailedReadMidRunFailsTheStepOnEveryRank) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  EngineConfig config = Config(2, 3, 1, {true, true});
  config.mutable_comm()->set_timeout_s(kFaultWatchdogSeconds);
  TrainRun run = MakeRun(config, grid);
  ASSERT_NE(run.engine, nullptr);
  ASSERT_TRUE(run.Steps(2).ok());
  OffloadStore* store = dynamic_cast<EngineImpl&>(*run.engine).offload_store();
  ASSERT_NE(store, nullptr);
  if (grid.dp_rank() == 1) {
    // A chunk's pieces are read master first, then each state kind: the
    // fifth read of the step is the second chunk's first state kind.
    ASSERT_TRUE(InjectIoFaultForTesting(store->io(), {/*write=*/false, /*nth=*/5, EIO}).ok());
  }
  const absl::Time start = absl::Now();
  const absl::Status s = run.Steps(1);
  EXPECT_LT(absl::ToDoubleSeconds(absl::Now() - start), kFaultWatchdogSeconds);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  ExpectAgreedIoError(s, 1, "WAIT_LOAD chunk 1", "optimizer_state", "read", "Input/output error");
  EXPECT_FALSE(run.Steps(1).ok());
}

// A real full disk during a STORE: dp rank 0's nvme_dir is a small ext2,
// which has no fallocate, so its files take blocks as the writes come; it
// is filled after Engine::Create, and the first step's stores find no
// space. The other ranks' directories are fine (nvme_dir may differ).
TEST(OffloadMpiTest, AFullDiskDuringAStoreFailsTheStepOnEveryRank) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  absl::StatusOr<std::unique_ptr<LoopFilesystem>> fs = absl::UnavailableError("not rank 0");
  if (grid.dp_rank() == 0) fs = LoopFilesystem::Mount("ext2", 8, "/tmp");
  const std::string why = grid.dp_rank() == 0 && !fs.ok() ? std::string(fs.status().message()) : "";
  int32_t refused = grid.dp_rank() == 0 && !fs.ok() ? 1 : 0;
  ASSERT_TRUE(grid.control(GridAxis::kDp).AllReduce(&refused, 1, DType::kI32, ReduceOp::kSum)->Wait().ok());
  if (refused != 0) GTEST_SKIP() << "dp rank 0 cannot mount a loop ext2 here" << (why.empty() ? "" : ": ") << why;
  EngineConfig config = Config(1, 3, 1, {true, false});
  config.mutable_comm()->set_timeout_s(kFaultWatchdogSeconds);
  if (grid.dp_rank() == 0) config.mutable_offload()->set_nvme_dir((*fs)->dir());
  TrainRun run = MakeRun(config, grid);
  ASSERT_NE(run.engine, nullptr);
  if (grid.dp_rank() == 0) {
    absl::StatusOr<int64_t> filled = (*fs)->Fill();
    ASSERT_TRUE(filled.ok()) << filled.status();
    absl::StatusOr<FilesystemInfo> info = InspectFilesystem((*fs)->dir());
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->available_bytes, 0) << "the filler left space";
  }
  const absl::Status s = run.Steps(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  ExpectAgreedIoError(s, 0, "", "optimizer_state", "write", "No space left on device");
  EXPECT_FALSE(run.Steps(1).ok());
  run.engine.reset();  // closes the files before the filesystem goes
}

// The files are anonymous (O_TMPFILE, docs/offload_io.md): nvme_dir holds
// no entry while the engine runs, so there is no file to remove; removing
// the directory itself between steps changes nothing — the run goes on,
// bitwise equal to the resident one.
TEST(OffloadMpiTest, RemovingTheDirectoryBetweenStepsChangesNothing) {
  if (!DataParallelWorld3()) GTEST_SKIP() << "runs on 3 ranks";
  ProcessGrid& grid = CachedGrid({3, 1, 1});
  const std::string dir = absl::StrCat(TmpDir(), "/removed_nvme_dir_rank", grid.dp_rank());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0) << dir << ": " << std::strerror(errno);
  EngineConfig config = Config(3, 3, 1, {true, true});
  config.mutable_offload()->set_nvme_dir(dir);
  TrainRun resident = MakeRun(Config(3, 3, 1, Offload()), grid);
  TrainRun streamed = MakeRun(config, grid);
  ASSERT_NE(resident.engine, nullptr);
  ASSERT_NE(streamed.engine, nullptr);
  ASSERT_TRUE(resident.Steps(kSteps).ok());
  ASSERT_TRUE(streamed.Steps(2).ok());
  EXPECT_EQ(::rmdir(dir.c_str()), 0) << dir << " is not empty or cannot be removed: " << std::strerror(errno);
  const absl::Status s = streamed.Steps(kSteps - 2);
  ASSERT_TRUE(s.ok()) << s;
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(std::memcmp(&resident.results[i].loss, &streamed.results[i].loss, sizeof(float)), 0) << "step " << i;
  }
  EXPECT_GT(streamed.results.back().io.write_bytes, 0);
  ExpectSameState(*resident.engine, *streamed.engine, "after the directory was removed");
}

}  // namespace
}  // namespace zeroshard

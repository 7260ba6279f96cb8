// The engine's timeline trace (engine.logging.trace_path) under mpirun: one
// file from every rank, the recorded window, spans that nest, collectives
// that line up across ranks once the clocks are aligned, and the errors.
//
// GPT-2 tiny (2 layers, C = 16, V = 67, T = 8), every unit but the last
// recomputed (EVERY_UNIT), 12 sequences per step.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "models/gpt2/gpt2.h"
#include "tests/data_parallel_world.h"

namespace zeroshard {
namespace {

using nlohmann::json;

constexpr int kGlobalBatch = 12;
constexpr int kTraceSteps = 2;

Gpt2Config Tiny() { return TinyGpt2(); }

ProcessGrid& Grid() { return DataParallelWorld(); }

// TEST_TMPDIR is the same for every rank of the mpirun job.
std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

EngineConfig TracedConfig(int stage, const std::string& trace_path) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_zero()->set_prefetch(1);
  c.mutable_zero()->set_bucket_bytes(4096);  // several buckets
  c.mutable_parallel()->set_dp(Grid().dp().size());
  c.mutable_optimizer()->set_lr(1e-3);
  c.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::EVERY_UNIT);
  c.mutable_device()->set_threads_per_rank(1);
  c.mutable_logging()->set_trace_path(trace_path);
  c.mutable_logging()->set_trace_steps(kTraceSteps);
  return c;
}

std::unique_ptr<Engine> MakeEngine(const EngineConfig& config) {
  auto model = BuildGpt2(Tiny());
  EXPECT_TRUE(model.ok()) << model.status();
  auto engine = Engine::Create(config, &Grid(), std::move(model).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

struct Span {
  std::string name, cat;
  double ts, end;
};

// Per rank and track (0 compute, 1 comm): the spans, by start time.
using Spans = std::map<int, std::map<int, std::vector<Span>>>;

Spans SpansOf(const json& trace) {
  Spans out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"].get<double>();
    out[e["pid"].get<int>()][e["tid"].get<int>()].push_back(
        {e["name"].get<std::string>(), e["cat"].get<std::string>(), ts, ts + e["dur"].get<double>()});
  }
  for (auto& [rank, tracks] : out) {
    for (auto& [tid, spans] : tracks) {
      std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.ts < b.ts; });
    }
  }
  return out;
}

int Count(const std::vector<Span>& spans, const std::string& cat, const std::string& prefix = "") {
  return static_cast<int>(std::count_if(spans.begin(), spans.end(), [&](const Span& s) {
    return s.cat == cat && absl::StartsWith(s.name, prefix);
  }));
}

class TraceTest : public testing::TestWithParam<int> {};

TEST_P(TraceTest, OneFileFromEveryRankWithTheWindowNestedAndAligned) {
  const int stage = GetParam();
  const int n = Grid().dp().size();
  const std::string path = TmpPath(absl::StrCat("trace_stage", stage, ".json"));
  std::unique_ptr<Engine> engine = MakeEngine(TracedConfig(stage, path));
  ASSERT_NE(engine, nullptr);
  ASSERT_NE(engine->timeline(), nullptr);
  const int L = engine->num_units();
  std::vector<HostBatch> batches = MicroBatchesForRank(RandomTokens(5, kGlobalBatch, Tiny().seq_len, Tiny().vocab_size),
                                                       kGlobalBatch, Tiny().seq_len, n, 1, Grid().dp_rank());
  const std::vector<Batch> views = Views(batches);
  int64_t gathers_before = 0, gathers_after = 0;
  for (int u = 0; u < L; ++u) gathers_before += engine->gathers(u);
  for (int s = 1; s <= kTraceSteps + 1; ++s) {
    ASSERT_TRUE(engine->TrainStep(views).ok());
    EXPECT_EQ(engine->trace_due(), s >= kTraceSteps) << "after step " << s;
    if (s == kTraceSteps) {
      for (int u = 0; u < L; ++u) gathers_after += engine->gathers(u);
    }
  }
  absl::StatusOr<TraceFileInfo> info = engine->WriteTrace();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(engine->trace_due());
  // A second call repeats the result without a collective.
  const CommStats before = engine->comm_stats();
  absl::StatusOr<TraceFileInfo> again = engine->WriteTrace();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->events, info->events);
  EXPECT_EQ((engine->comm_stats() - before).Total().calls, 0);
  if (Grid().dp_rank() != 0) return;

  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path;
  json trace = json::parse(file, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(trace.is_discarded()) << path << " is not valid JSON";
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  EXPECT_EQ(trace["otherData"]["ranks"], n);
  EXPECT_EQ(trace["otherData"]["zero_stage"], stage);
  EXPECT_EQ(trace["otherData"]["traced_steps"], kTraceSteps);
  const std::vector<double> rtt = trace["otherData"]["clock_sync_rtt_us"].get<std::vector<double>>();
  ASSERT_EQ(static_cast<int>(rtt.size()), n);

  std::set<std::string> names;
  int counters = 0, x_events = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M") {
      // value(): a const json's operator[] on a missing key is undefined.
      names.insert(absl::StrCat(e["pid"].get<int>(), "/", e["name"].get<std::string>(), "/",
                                e["args"].value("name", std::string())));
    }
    if (e["ph"] == "C") {
      ++counters;
      EXPECT_EQ(e["args"].size(), static_cast<size_t>(kNumMemoryCategories));
      EXPECT_GT(e["args"]["master_params"].get<int64_t>(), 0);
    }
    if (e["ph"] == "X") ++x_events;
  }
  EXPECT_EQ(x_events + counters, info->events);
  Spans spans = SpansOf(trace);
  ASSERT_EQ(static_cast<int>(spans.size()), n) << "events from every rank";
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_TRUE(names.count(absl::StrCat(r, "/process_name/rank ", r)));
    EXPECT_TRUE(names.count(absl::StrCat(r, "/thread_name/compute")));
    EXPECT_TRUE(names.count(absl::StrCat(r, "/thread_name/comm")));
    const std::vector<Span>& compute = spans[r][0];
    const std::vector<Span>& comm = spans[r][1];
    // The window: steps 1 and 2, not 3.
    std::vector<std::string> steps;
    for (const Span& s : compute) {
      if (s.cat == "step") steps.push_back(s.name);
    }
    EXPECT_EQ(steps, (std::vector<std::string>{"step 1", "step 2"}));
    EXPECT_EQ(Count(compute, "forward"), kTraceSteps * L);
    EXPECT_EQ(Count(compute, "backward"), kTraceSteps * L);
    EXPECT_EQ(Count(compute, "recompute"), kTraceSteps * (L - 1));
    EXPECT_EQ(Count(compute, "optimizer", "optimizer"), kTraceSteps);
    // One UPDATE per gradient bucket.
    EXPECT_EQ(Count(compute, "optimizer", "update"), kTraceSteps * engine->reducer().num_buckets());
    EXPECT_EQ(Count(comm, "gather"), gathers_after - gathers_before);
    EXPECT_EQ(Count(comm, "gather") > 0, stage == 3);
    EXPECT_EQ(Count(comm, "reduce_scatter"), kTraceSteps * engine->reducer().num_buckets());
    EXPECT_EQ(Count(comm, "publish", "AllGather params") > 0, stage == 1 || stage == 2);
    EXPECT_EQ(Count(comm, "publish", "AllGather grads") > 0, stage == 0);
    EXPECT_EQ(Count(comm, "allreduce", "AllReduce grad norm"), kTraceSteps);
    // Compute spans nest or follow each other; collectives never overlap.
    for (size_t i = 0; i < compute.size(); ++i) {
      for (size_t j = i + 1; j < compute.size() && compute[j].ts < compute[i].end; ++j) {
        EXPECT_LE(compute[j].end, compute[i].end) << compute[j].name << " straddles the end of " << compute[i].name;
      }
    }
    for (size_t i = 1; i < comm.size(); ++i) {
      EXPECT_GE(comm[i].ts, comm[i - 1].end) << comm[i].name << " overlaps " << comm[i - 1].name;
    }
  }
  // Collective k is the same operation on every rank, and no rank finished it
  // before another started it, up to the clock alignment's error bound.
  for (int r = 1; r < n; ++r) {
    ASSERT_EQ(spans[r][1].size(), spans[0][1].size()) << "rank " << r;
    for (size_t k = 0; k < spans[0][1].size(); ++k) {
      EXPECT_EQ(spans[r][1][k].name, spans[0][1][k].name) << "collective " << k;
    }
  }
  for (size_t k = 0; k < spans[0][1].size(); ++k) {
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        const double tolerance = (rtt[a] + rtt[b]) / 2 + 0.01;
        EXPECT_GE(spans[a][1][k].end + tolerance, spans[b][1][k].ts)
            << spans[a][1][k].name << ": rank " << a << " finished before rank " << b << " started";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, TraceTest, testing::Values(0, 1, 2, 3),
                         [](const testing::TestParamInfo<int>& p) { return absl::StrCat("Stage", p.param); });

TEST(TraceWindowTest, TraceStepsZeroRecordsEveryStepAndWritesWhenAsked) {
  const int n = Grid().dp().size();
  const std::string path = TmpPath("trace_every_step.json");
  EngineConfig config = TracedConfig(3, path);
  config.mutable_logging()->set_trace_steps(0);
  std::unique_ptr<Engine> engine = MakeEngine(config);
  ASSERT_NE(engine, nullptr);
  std::vector<HostBatch> batches = MicroBatchesForRank(RandomTokens(6, kGlobalBatch, Tiny().seq_len, Tiny().vocab_size),
                                                       kGlobalBatch, Tiny().seq_len, n, 1, Grid().dp_rank());
  for (int s = 1; s <= 3; ++s) {
    ASSERT_TRUE(engine->TrainStep(Views(batches)).ok());
    EXPECT_FALSE(engine->trace_due()) << "no window to close with trace_steps 0";
  }
  ASSERT_TRUE(engine->WriteTrace().ok());
  if (Grid().dp_rank() != 0) return;
  std::ifstream file(path);
  json trace = json::parse(file, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(trace.is_discarded());
  Spans spans = SpansOf(trace);
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> steps;
    for (const Span& s : spans[r][0]) {
      if (s.cat == "step") steps.push_back(s.name);
    }
    EXPECT_EQ(steps, (std::vector<std::string>{"step 1", "step 2", "step 3"})) << "rank " << r;
  }
}

TEST(TraceErrorsTest, RanksThatDisagreeOnTheTraceWindowFailCreate) {
  if (Grid().dp().size() < 2) GTEST_SKIP() << "needs 2 or more ranks to disagree";
  EngineConfig config = TracedConfig(3, TmpPath(absl::StrCat("trace_rank", Grid().dp_rank(), ".json")));
  if (Grid().dp_rank() == 1) config.mutable_logging()->set_trace_steps(kTraceSteps + 1);
  auto model = BuildGpt2(Tiny());
  ASSERT_TRUE(model.ok());
  auto engine = Engine::Create(config, &Grid(), std::move(model).value());
  ASSERT_FALSE(engine.ok()) << "per-rank paths may differ, the window may not";
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(engine.status().message(), "the engine config differs")) << engine.status();
}

TEST(TraceErrorsTest, AFailedWriteFailsEveryRankWithOneCodeAndLeavesNoTemporaryFile) {
  const std::string dir = TmpPath("trace_rename_fails");
  const std::string path = absl::StrCat(dir, "/trace.json");
  std::unique_ptr<Engine> engine = MakeEngine(TracedConfig(3, path));  // creates `dir` on rank 0
  ASSERT_NE(engine, nullptr);
  if (Grid().dp_rank() == 0) {
    // A non-empty directory where the file should go: the final rename fails.
    ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
    std::ofstream(absl::StrCat(path, "/keep")) << "x";
  }
  ASSERT_TRUE(Grid().dp().Barrier()->Wait().ok());
  absl::StatusOr<TraceFileInfo> info = engine->WriteTrace();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInternal) << info.status();
  if (Grid().dp_rank() == 0) {
    EXPECT_TRUE(absl::StrContains(info.status().message(), path)) << info.status();
    struct stat st;
    EXPECT_NE(stat(absl::StrCat(path, ".tmp").c_str(), &st), 0) << "the half-done .tmp was left behind";
  } else {
    EXPECT_EQ(info.status().message(), absl::StrCat("rank 0 failed to write the trace ", path, " (see its error)"));
  }
}

TEST(TraceErrorsTest, AnUnwritableTraceDirectoryFailsCreateOnEveryRank) {
  const std::string blocker = TmpPath("not_a_directory");
  if (Grid().dp_rank() == 0) {
    std::ofstream(blocker) << "a file where the trace's directory should be";
  }
  ASSERT_TRUE(Grid().dp().Barrier()->Wait().ok());
  const std::string path = absl::StrCat(blocker, "/trace.json");
  auto model = BuildGpt2(Tiny());
  ASSERT_TRUE(model.ok());
  auto engine = Engine::Create(TracedConfig(3, path), &Grid(), std::move(model).value());
  ASSERT_FALSE(engine.ok());
  if (Grid().dp_rank() == 0) {
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(engine.status().message(), absl::StrCat("engine.logging.trace_path: '", path,
                                                                          "': directory '", blocker, "'")))
        << engine.status();
  } else {
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition) << engine.status();
  }
}

TEST(TraceErrorsTest, WithoutATracePathThereIsNoTimeline) {
  std::unique_ptr<Engine> engine = MakeEngine(TracedConfig(3, ""));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->timeline(), nullptr);
  EXPECT_FALSE(engine->trace_due());
  absl::StatusOr<TraceFileInfo> info = engine->WriteTrace();
  EXPECT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zeroshard

#include "engine/pipeline_program.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/comm_stats.h"
#include "engine/optimizer_program.h"
#include "engine/program_simulator.h"
#include "engine/step_program.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using S = PipelineScheduleKind;

// Three units a, b, c (gather bytes 100, 200, 300); c borrows from a (a
// tied weight), so with chunks {a} and {b, c} stage 1 mirrors a.
std::vector<ProgramUnit> Units(int n = 3) {
  std::vector<ProgramUnit> units(n);
  const char* names[] = {"a", "b", "c", "d"};
  for (int u = 0; u < n; ++u) {
    units[u].name = names[u];
    units[u].needs = {u};
    units[u].gather_bytes = 100 * (u + 1);
  }
  units[n - 1].needs = {n - 1, 0};
  return units;
}

PipelineProgramInput Input(S schedule, int stage, int zero_stage, int v = 1) {
  PipelineProgramInput in;
  in.schedule = schedule;
  in.shape.stages = 2;
  in.shape.virtual_stages = v;
  in.shape.micro_batches = 2;
  in.stage = stage;
  in.zero = *ZeroPolicy::ForStage(zero_stage);
  if (v == 1) {
    in.units = Units(3);
    in.chunk_begin = {0, 1, 3};
    // Stage 0: a; stage 1: b..c and the mirror of a (the tied weight's
    // gradient from c).
    if (stage == 0) {
      in.buckets = {{{0}, 10, "a"}};
    } else {
      in.buckets = {{{1, 2}, 50, "b..c"}, {{0}, 10, "a"}};
    }
  } else {
    in.units = Units(4);
    in.chunk_begin = {0, 1, 2, 3, 4};
    // Stage 0: chunks 0 (a) and 2 (c); stage 1: chunks 1 (b) and 3 (d), a's mirror.
    if (stage == 0) {
      in.buckets = {{{2}, 30, "c"}, {{0}, 10, "a"}};
    } else {
      in.buckets = {{{3}, 40, "d"}, {{0, 1}, 30, "a..b"}};
    }
  }
  return in;
}

// A program's expected text, written from the line after R"(.
std::string Program(const char* text) { return text[0] == '\n' ? text + 1 : text; }

std::string Text(const PipelineProgramInput& in) {
  absl::StatusOr<StepProgram> p = BuildPipelineProgram(in);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? FormatProgram(*p) : "";
}

std::string Error(const PipelineProgramInput& in) {
  absl::StatusOr<StepProgram> p = BuildPipelineProgram(in);
  if (p.ok()) return "ok";
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(p.status().message());
}

// Stage 0 posts each micro-batch's RECV_GRAD one operation ahead and
// reduces a's bucket after its last backward; stage 1 reduces the mirror's
// bucket (a, written by c's backward) right after c's last backward and
// b..c after b's.
TEST(PipelineProgramTest, GpipeBothStages) {
  EXPECT_EQ(Text(Input(S::kGpipe, 0, 0)), Program(R"(
FORWARD mb=0 unit=a
SEND_ACT mb=0 unit=a peer=1 bytes=0
RECV_GRAD mb=0 unit=a peer=1 bytes=0
FORWARD mb=1 unit=a
SEND_ACT mb=1 unit=a peer=1 bytes=0
RECV_GRAD mb=1 unit=a peer=1 bytes=0
BACKWARD mb=0 unit=a
BACKWARD mb=1 unit=a
REDUCE bucket=a bytes=10
WAIT_REDUCE bucket=a
)"));
  EXPECT_EQ(Text(Input(S::kGpipe, 1, 0)), Program(R"(
RECV_ACT mb=0 unit=b peer=0 bytes=0
RECV_ACT mb=1 unit=b peer=0 bytes=0
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=1 unit=b
FORWARD mb=1 unit=c
BACKWARD mb=0 unit=c
BACKWARD mb=0 unit=b
SEND_GRAD mb=0 unit=b peer=0 bytes=0
BACKWARD mb=1 unit=c
REDUCE bucket=a bytes=10
BACKWARD mb=1 unit=b
SEND_GRAD mb=1 unit=b peer=0 bytes=0
REDUCE bucket=b..c bytes=50
WAIT_REDUCE bucket=a
WAIT_REDUCE bucket=b..c
)"));
}

// Each unit, the mirror a included, is gathered once (at its first use,
// one unit of look-ahead in the order of first uses) and released at the
// end.
TEST(PipelineProgramTest, OneFOneBStage3KeepsUnitsGatheredForTheStep) {
  EXPECT_EQ(Text(Input(S::kOneFOneB, 0, 3)), Program(R"(
GATHER unit=a bytes=100
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
SEND_ACT mb=0 unit=a peer=1 bytes=0
RECV_GRAD mb=0 unit=a peer=1 bytes=0
FORWARD mb=1 unit=a
SEND_ACT mb=1 unit=a peer=1 bytes=0
RECV_GRAD mb=1 unit=a peer=1 bytes=0
BACKWARD mb=0 unit=a
BACKWARD mb=1 unit=a
REDUCE bucket=a bytes=10
WAIT_REDUCE bucket=a
RELEASE unit=a
)"));
  EXPECT_EQ(Text(Input(S::kOneFOneB, 1, 3)), Program(R"(
RECV_ACT mb=0 unit=b peer=0 bytes=0
GATHER unit=b bytes=200
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
GATHER unit=a bytes=100
WAIT_GATHER unit=c
WAIT_GATHER unit=a
FORWARD mb=0 unit=c
RECV_ACT mb=1 unit=b peer=0 bytes=0
BACKWARD mb=0 unit=c
BACKWARD mb=0 unit=b
SEND_GRAD mb=0 unit=b peer=0 bytes=0
FORWARD mb=1 unit=b
FORWARD mb=1 unit=c
BACKWARD mb=1 unit=c
REDUCE bucket=a bytes=10
BACKWARD mb=1 unit=b
SEND_GRAD mb=1 unit=b peer=0 bytes=0
REDUCE bucket=b..c bytes=50
WAIT_REDUCE bucket=a
WAIT_REDUCE bucket=b..c
RELEASE unit=a
RELEASE unit=b
RELEASE unit=c
)"));
}

// The data-parallel builder's rules per operation: gathered and released
// for every forward and backward of every micro-batch, except across a
// chunk's turnaround (its forward, then its backward of the same micro-batch).
TEST(PipelineProgramTest, OneFOneBStage3GatheredPerMicroBatch) {
  PipelineProgramInput in = Input(S::kOneFOneB, 1, 3);
  in.keep_gathered_across_micro_batches = false;
  EXPECT_EQ(Text(in), Program(R"(
RECV_ACT mb=0 unit=b peer=0 bytes=0
GATHER unit=b bytes=200
GATHER unit=c bytes=300
GATHER unit=a bytes=100
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
RELEASE unit=b
WAIT_GATHER unit=c
WAIT_GATHER unit=a
FORWARD mb=0 unit=c
GATHER unit=b bytes=200
RECV_ACT mb=1 unit=b peer=0 bytes=0
BACKWARD mb=0 unit=c
RELEASE unit=c
RELEASE unit=a
WAIT_GATHER unit=b
BACKWARD mb=0 unit=b
SEND_GRAD mb=0 unit=b peer=0 bytes=0
RELEASE unit=b
GATHER unit=b bytes=200
GATHER unit=c bytes=300
GATHER unit=a bytes=100
WAIT_GATHER unit=b
FORWARD mb=1 unit=b
RELEASE unit=b
WAIT_GATHER unit=c
WAIT_GATHER unit=a
FORWARD mb=1 unit=c
GATHER unit=b bytes=200
BACKWARD mb=1 unit=c
RELEASE unit=c
RELEASE unit=a
REDUCE bucket=a bytes=10
WAIT_GATHER unit=b
BACKWARD mb=1 unit=b
SEND_GRAD mb=1 unit=b peer=0 bytes=0
RELEASE unit=b
REDUCE bucket=b..c bytes=50
WAIT_REDUCE bucket=a
WAIT_REDUCE bucket=b..c
)"));
}

// Stage 0 runs each W right after its B and sends no gradient: one
// BACKWARD each. Stage 1 (the last) defers W of mb 0 behind B of mb 1; its
// buckets close at BACKWARD_WEIGHT.
TEST(PipelineProgramTest, ZeroBubbleSplitsTheBackward) {
  EXPECT_EQ(Text(Input(S::kZeroBubbleH1, 0, 0)), Program(R"(
FORWARD mb=0 unit=a
SEND_ACT mb=0 unit=a peer=1 bytes=0
RECV_GRAD mb=0 unit=a peer=1 bytes=0
FORWARD mb=1 unit=a
SEND_ACT mb=1 unit=a peer=1 bytes=0
RECV_GRAD mb=1 unit=a peer=1 bytes=0
BACKWARD mb=0 unit=a
BACKWARD mb=1 unit=a
REDUCE bucket=a bytes=10
WAIT_REDUCE bucket=a
)"));
  EXPECT_EQ(Text(Input(S::kZeroBubbleH1, 1, 3)), Program(R"(
RECV_ACT mb=0 unit=b peer=0 bytes=0
GATHER unit=b bytes=200
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
GATHER unit=a bytes=100
WAIT_GATHER unit=c
WAIT_GATHER unit=a
FORWARD mb=0 unit=c
RECV_ACT mb=1 unit=b peer=0 bytes=0
BACKWARD_INPUT mb=0 unit=c
BACKWARD_INPUT mb=0 unit=b
SEND_GRAD mb=0 unit=b peer=0 bytes=0
FORWARD mb=1 unit=b
FORWARD mb=1 unit=c
BACKWARD_INPUT mb=1 unit=c
BACKWARD_INPUT mb=1 unit=b
SEND_GRAD mb=1 unit=b peer=0 bytes=0
BACKWARD_WEIGHT mb=0 unit=c
BACKWARD_WEIGHT mb=0 unit=b
BACKWARD_WEIGHT mb=1 unit=c
REDUCE bucket=a bytes=10
BACKWARD_WEIGHT mb=1 unit=b
REDUCE bucket=b..c bytes=50
WAIT_REDUCE bucket=a
WAIT_REDUCE bucket=b..c
RELEASE unit=a
RELEASE unit=b
RELEASE unit=c
)"));
}

// pp 2, v 2, four units, one per chunk: stage 0 runs chunks 0 (a) and 2
// (c), stage 1 chunks 1 (b) and 3 (d, with a's mirror). Stage 1 sends to
// stage 0 both ways across the c/b and d/c boundaries; its a..b bucket
// closes at b (its last backward comes after d's).
TEST(PipelineProgramTest, InterleavedTwoChunksPerStage) {
  EXPECT_EQ(Text(Input(S::kInterleaved1F1B, 0, 0, 2)), Program(R"(
FORWARD mb=0 unit=a
SEND_ACT mb=0 unit=a peer=1 bytes=0
RECV_ACT mb=0 unit=c peer=1 bytes=0
FORWARD mb=1 unit=a
SEND_ACT mb=1 unit=a peer=1 bytes=0
RECV_ACT mb=1 unit=c peer=1 bytes=0
FORWARD mb=0 unit=c
SEND_ACT mb=0 unit=c peer=1 bytes=0
RECV_GRAD mb=0 unit=c peer=1 bytes=0
FORWARD mb=1 unit=c
SEND_ACT mb=1 unit=c peer=1 bytes=0
RECV_GRAD mb=1 unit=c peer=1 bytes=0
BACKWARD mb=0 unit=c
SEND_GRAD mb=0 unit=c peer=1 bytes=0
RECV_GRAD mb=0 unit=a peer=1 bytes=0
BACKWARD mb=1 unit=c
SEND_GRAD mb=1 unit=c peer=1 bytes=0
REDUCE bucket=c bytes=30
RECV_GRAD mb=1 unit=a peer=1 bytes=0
BACKWARD mb=0 unit=a
BACKWARD mb=1 unit=a
REDUCE bucket=a bytes=10
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a
)"));
  EXPECT_EQ(Text(Input(S::kInterleaved1F1B, 1, 0, 2)), Program(R"(
RECV_ACT mb=0 unit=b peer=0 bytes=0
RECV_ACT mb=1 unit=b peer=0 bytes=0
FORWARD mb=0 unit=b
SEND_ACT mb=0 unit=b peer=0 bytes=0
RECV_ACT mb=0 unit=d peer=0 bytes=0
FORWARD mb=1 unit=b
SEND_ACT mb=1 unit=b peer=0 bytes=0
FORWARD mb=0 unit=d
RECV_ACT mb=1 unit=d peer=0 bytes=0
BACKWARD mb=0 unit=d
SEND_GRAD mb=0 unit=d peer=0 bytes=0
FORWARD mb=1 unit=d
RECV_GRAD mb=0 unit=b peer=0 bytes=0
BACKWARD mb=1 unit=d
SEND_GRAD mb=1 unit=d peer=0 bytes=0
REDUCE bucket=d bytes=40
RECV_GRAD mb=1 unit=b peer=0 bytes=0
BACKWARD mb=0 unit=b
SEND_GRAD mb=0 unit=b peer=0 bytes=0
BACKWARD mb=1 unit=b
SEND_GRAD mb=1 unit=b peer=0 bytes=0
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=d
WAIT_REDUCE bucket=a..b
)"));
}

// Micro-batch 0's forwards only: no SEND from the last stage, no reduction.
TEST(PipelineProgramTest, Evaluation) {
  PipelineProgramInput in = Input(S::kOneFOneB, 1, 3);
  in.training = false;
  EXPECT_EQ(Text(in), Program(R"(
RECV_ACT mb=0 unit=b peer=0 bytes=0
GATHER unit=b bytes=200
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
GATHER unit=a bytes=100
WAIT_GATHER unit=c
WAIT_GATHER unit=a
FORWARD mb=0 unit=c
RELEASE unit=a
RELEASE unit=b
RELEASE unit=c
)"));
}

// A frozen first unit (no backward) and a checkpointed one: stage 0 has no
// backward at all and receives no gradient; stage 1 sends none and
// recomputes b before its backward.
TEST(PipelineProgramTest, FrozenAndCheckpointedUnits) {
  PipelineProgramInput in = Input(S::kOneFOneB, 0, 0);
  in.units[0].backward = false;
  in.units[1].checkpointed = true;
  in.buckets.clear();
  EXPECT_EQ(Text(in), Program(R"(
FORWARD mb=0 unit=a
SEND_ACT mb=0 unit=a peer=1 bytes=0
FORWARD mb=1 unit=a
SEND_ACT mb=1 unit=a peer=1 bytes=0
)"));
  in.stage = 1;
  in.buckets = {{{1, 2}, 50, "b..c"}};
  EXPECT_EQ(Text(in), Program(R"(
RECV_ACT mb=0 unit=b peer=0 bytes=0
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
RECV_ACT mb=1 unit=b peer=0 bytes=0
BACKWARD mb=0 unit=c
RECOMPUTE mb=0 unit=b
BACKWARD mb=0 unit=b
FORWARD mb=1 unit=b
FORWARD mb=1 unit=c
BACKWARD mb=1 unit=c
RECOMPUTE mb=1 unit=b
BACKWARD mb=1 unit=b
REDUCE bucket=b..c bytes=50
WAIT_REDUCE bucket=b..c
)"));
}

TEST(PipelineProgramTest, TransfersNameTheTensorTheSameOnBothSides) {
  absl::StatusOr<StepProgram> p0 = BuildPipelineProgram(Input(S::kInterleaved1F1B, 0, 0, 2));
  absl::StatusOr<StepProgram> p1 = BuildPipelineProgram(Input(S::kInterleaved1F1B, 1, 0, 2));
  ASSERT_TRUE(p0.ok() && p1.ok());
  auto issue = [](const StepProgram& p, const std::string& line) {
    for (const Action& a : p.actions) {
      if (FormatAction(p, a) == line) return a.issues.at(0);
    }
    ADD_FAILURE() << "no action " << line;
    return IssuedCollective();
  };
  // b's output goes from stage 1 to stage 0 (chunk 1 -> 2), its gradient back.
  EXPECT_EQ(issue(*p1, "SEND_ACT mb=1 unit=b peer=0 bytes=0"),
            (IssuedCollective{"pp", CommOp::kSend, 0, "act b mb 1"}));
  EXPECT_EQ(issue(*p0, "RECV_ACT mb=1 unit=c peer=1 bytes=0"),
            (IssuedCollective{"pp", CommOp::kRecv, 0, "act b mb 1"}));
  EXPECT_EQ(issue(*p0, "SEND_GRAD mb=0 unit=c peer=1 bytes=0"),
            (IssuedCollective{"pp", CommOp::kSend, 0, "grad b mb 0"}));
  EXPECT_EQ(issue(*p1, "RECV_GRAD mb=0 unit=b peer=0 bytes=0"),
            (IssuedCollective{"pp", CommOp::kRecv, 0, "grad b mb 0"}));
  EXPECT_EQ(p0->micro_batches, 2);
  EXPECT_EQ(p0->num_units, 4);
  EXPECT_EQ(p0->names.units, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(p0->names.buckets, (std::vector<std::string>{"c", "a"}));
  // Stage 1's a..b is written by b and by d (borrowing from a).
  EXPECT_EQ(p1->bucket_writers, (std::vector<std::vector<int>>{{3}, {1, 3}}));
  const PipelineStageUnits held = StageUnits(Input(S::kInterleaved1F1B, 1, 0, 2));
  EXPECT_EQ(held.own, (std::vector<int>{1, 3}));
  EXPECT_EQ(held.mirrors, (std::vector<int>{0}));
  EXPECT_TRUE(StageUnits(Input(S::kInterleaved1F1B, 0, 0, 2)).mirrors.empty());
}

// Every stage's program of many shapes, for 2 dp ranks per stage, passes
// the simulator together: transfers match, nothing deadlocks, every
// reduction follows its writers, everything gathered is released.
TEST(PipelineProgramTest, EveryBuiltProgramPassesTheSimulator) {
  int simulated = 0;
  for (S schedule : {S::kGpipe, S::kOneFOneB, S::kInterleaved1F1B, S::kZeroBubbleH1}) {
    for (int pp = 1; pp <= 4; ++pp) {
      for (int v = 1; v <= 2; ++v) {
        for (int m = 1; m <= 5; ++m) {
          for (int variant = 0; variant < 8; ++variant) {
            PipelineShape shape;
            shape.stages = pp;
            shape.virtual_stages = v;
            shape.micro_batches = m;
            if (!ValidatePipelineShape(schedule, shape).ok()) continue;
            const int chunks = pp * v, n = chunks + variant % 3;
            const int zero_stage = variant % 4;
            std::vector<ProgramUnit> units(n);
            for (int u = 0; u < n; ++u) {
              units[u].name = absl::StrCat("u", u);
              units[u].needs = {u};
              units[u].gather_bytes = 10 * (u + 1);
              units[u].persistent = variant == 5 && u == 1;
              units[u].checkpointed = variant == 6 && u % 2 == 1;
            }
            const bool frozen = variant == 7 && n > 1;
            if (frozen) units[0].backward = false;
            if (!frozen && n > 1) units[n - 1].needs = {n - 1, 0};  // tied to the first unit
            std::vector<int> chunk_begin = {0};
            for (int c = 0; c < chunks; ++c) chunk_begin.push_back(chunk_begin.back() + n / chunks + (c < n % chunks));
            const std::string where =
                absl::StrCat(PipelineScheduleName(schedule), " pp ", pp, " v ", v, " m ", m, " variant ", variant);
            for (bool training : {true, false}) {
              std::vector<SimulatedRank> ranks(2 * pp);
              for (int stage = 0; stage < pp; ++stage) {
                PipelineProgramInput in;
                in.schedule = schedule;
                in.shape = shape;
                in.stage = stage;
                in.chunk_begin = chunk_begin;
                in.units = units;
                in.zero = *ZeroPolicy::ForStage(zero_stage);
                in.prefetch = variant % 3;
                in.keep_gathered_across_micro_batches = variant % 2 == 0;
                in.reshard_after_forward = variant != 3;
                in.training = training;
                const PipelineStageUnits held = StageUnits(in);
                std::vector<int> with_grads;
                for (int u : held.own) {
                  if (units[u].backward) with_grads.push_back(u);
                }
                for (int u : held.mirrors) with_grads.push_back(u);
                std::sort(with_grads.begin(), with_grads.end());
                // One bucket per unit, last first; variant 4: one for all.
                if (variant == 4 && !with_grads.empty()) {
                  in.buckets.push_back({with_grads, 7, "all"});
                } else {
                  for (auto it = with_grads.rbegin(); it != with_grads.rend(); ++it) {
                    in.buckets.push_back({{*it}, 3, units[*it].name});
                  }
                }
                const bool tied = !held.mirrors.empty() || (stage == 0 && pp > 1 && !frozen && n > 1);
                absl::StatusOr<StepProgram> program = BuildPipelineProgram(in);
                ASSERT_TRUE(program.ok()) << where << " stage " << stage << ": " << program.status();
                if (training) {
                  // The optimizer phase as the step plan appends it: the
                  // tied unit's sum over "embed", the norm over "world".
                  OptimizerPhaseInput phase;
                  for (int u = 0; u < n; ++u) phase.units.push_back({units[u].name, 2, tied && u == 0});
                  for (const ProgramBucket& b : in.buckets) phase.buckets.push_back(b.units);
                  phase.zero = in.zero;
                  phase.norm_group = "world";
                  AddStepPrologueAndOptimizerPhase(phase, &*program);
                }
                for (int d = 0; d < 2; ++d) {
                  SimulatedRank& r = ranks[d + 2 * stage];
                  r.program = *program;
                  r.units = held.own;
                  r.gathers_params = zero_stage == 3;
                  r.groups["dp"] = {2 * stage, 2 * stage + 1};
                  for (int t = 0; t < pp; ++t) r.groups["pp"].push_back(d + 2 * t);
                  for (int w = 0; w < 2 * pp; ++w) r.groups["world"].push_back(w);
                  if (tied) r.groups["embed"] = {d, d + 2 * (pp - 1)};
                }
              }
              absl::StatusOr<Simulation> sim = SimulatePrograms(ranks);
              ASSERT_TRUE(sim.ok()) << where << (training ? " train" : " eval") << ": " << sim.status();
              ++simulated;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(simulated, 500);
}

TEST(PipelineProgramTest, InvalidInputs) {
  PipelineProgramInput in = Input(S::kZeroBubbleH1, 0, 0);
  in.shape.micro_batches = 1;
  EXPECT_EQ(Error(in),
            "engine.parallel.pipeline_schedule: ZERO_BUBBLE_H1 needs engine.gradient_accumulation_steps (1) >= "
            "engine.parallel.pp (2)");
  in = Input(S::kOneFOneB, 2, 0);
  EXPECT_EQ(Error(in), "stage is 2, expected in [0, 2)");
  in = Input(S::kOneFOneB, 0, 0);
  in.chunk_begin = {0, 3};
  EXPECT_EQ(Error(in), "chunk_begin has 2 entries, expected pp x virtual stages + 1 = 3");
  in.chunk_begin = {1, 2, 3};
  EXPECT_EQ(Error(in), "chunk_begin[0] is 1, expected 0");
  in.chunk_begin = {0, 1, 2};
  EXPECT_EQ(Error(in), "chunk_begin[2] is 2, expected the 3 units");
  in.chunk_begin = {0, 0, 3};
  EXPECT_EQ(Error(in), "chunk_begin[1] is 0, expected more than chunk_begin[0] = 0 (every chunk owns a unit)");
  in = Input(S::kOneFOneB, 0, 3);
  in.prefetch = -1;
  EXPECT_EQ(Error(in), "prefetch is -1, expected >= 0");
  in = Input(S::kOneFOneB, 0, 3);
  in.units[2].needs = {2, 3};
  EXPECT_EQ(Error(in), "unit 2 (c) needs unit 3, expected in [0, 3)");
  in = Input(S::kOneFOneB, 0, 3);
  in.units[1].gather_bytes = -1;
  EXPECT_EQ(Error(in), "unit 1 (b) has gather_bytes -1, expected >= 0");
  in = Input(S::kOneFOneB, 0, 3);
  in.units[2].backward = false;
  EXPECT_EQ(Error(in),
            "unit 2 (c) has backward false after unit 1 (b) with backward true; expected only a leading run of units "
            "without backward");
  in = Input(S::kOneFOneB, 0, 0);
  in.buckets = {{{1}, 20, "b"}};
  EXPECT_EQ(Error(in), "bucket 0 (b) lists unit 1 (b), which stage 0 neither computes nor mirrors");
  in.buckets = {{{3}, 20, "x"}};
  EXPECT_EQ(Error(in), "bucket 0 (x) lists unit 3, expected in [0, 3)");
  in.buckets = {{{0}, -1, "a"}};
  EXPECT_EQ(Error(in), "bucket 0 (a) has reduce_bytes -1, expected >= 0");
  in = Input(S::kOneFOneB, 1, 0);
  in.buckets = {{{1, 2}, 50, "b..c"}, {{0, 2}, 10, "a..c"}};
  EXPECT_EQ(Error(in), "unit 2 (c) is in buckets 0 and 1, expected in one");
}

}  // namespace
}  // namespace zeroshard

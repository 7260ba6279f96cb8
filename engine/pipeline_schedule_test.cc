#include "engine/pipeline_schedule.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using K = PipelineScheduleKind;
using O = ChunkOpKind;

constexpr K kAllKinds[] = {K::kGpipe, K::kOneFOneB, K::kInterleaved1F1B, K::kZeroBubbleH1};

PipelineShape Shape(int pp, int m, int v = 1) {
  PipelineShape s;
  s.stages = pp;
  s.micro_batches = m;
  s.virtual_stages = v;
  return s;
}

// "F(0,1)": kind(chunk, micro-batch).
std::string Text(const std::vector<ChunkOp>& ops) {
  std::vector<std::string> parts;
  for (const ChunkOp& op : ops)
    parts.push_back(absl::StrCat(ChunkOpKindName(op.kind), "(", op.chunk, ",", op.micro_batch, ")"));
  return absl::StrJoin(parts, " ");
}

std::vector<std::vector<ChunkOp>> Build(K kind, const PipelineShape& shape) {
  absl::StatusOr<std::vector<std::vector<ChunkOp>>> s = BuildPipelineSchedule(kind, shape);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::vector<std::vector<ChunkOp>>();
}

ScheduleTimeline Simulate(K kind, const PipelineShape& shape, int units_per_chunk = 1) {
  absl::StatusOr<ScheduleTimeline> t = SimulatePipelineSchedule(
      Build(kind, shape), shape, ChunkCosts::PerUnit(std::vector<int>(shape.chunks(), units_per_chunk)));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : ScheduleTimeline();
}

std::string ShapeError(K kind, const PipelineShape& shape) {
  absl::Status s = ValidatePipelineShape(kind, shape);
  if (s.ok()) return "ok";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildPipelineSchedule(kind, shape).status(), s);
  return std::string(s.message());
}

// Every shape with pp in [1, 8], m in [1, 16], v in [1, 4] a schedule
// accepts: each operation once on its stage, no deadlock, the peaks and the
// closed-form bubble exactly (equal chunks of n units, T_F = T_B = T_W).
TEST(PipelineScheduleTest, EveryAcceptedShapeRunsAndMatchesTheClosedForms) {
  int accepted = 0;
  for (K kind : kAllKinds) {
    for (int pp = 1; pp <= 8; ++pp) {
      for (int m = 1; m <= 16; ++m) {
        for (int v = 1; v <= 4; ++v) {
          const PipelineShape shape = Shape(pp, m, v);
          if (!ValidatePipelineShape(kind, shape).ok()) continue;
          ++accepted;
          const std::string where = absl::StrCat(PipelineScheduleName(kind), " pp ", pp, " m ", m, " v ", v);
          const std::vector<std::vector<ChunkOp>> schedule = Build(kind, shape);
          ASSERT_EQ(schedule.size(), static_cast<size_t>(pp)) << where;
          const bool split = kind == K::kZeroBubbleH1;
          for (int s = 0; s < pp; ++s) {
            // Each (chunk of s, mb) once per kind, nothing else.
            std::vector<std::vector<int>> count(3, std::vector<int>(shape.chunks() * m, 0));
            for (const ChunkOp& op : schedule[s]) {
              ASSERT_EQ(op.chunk % pp, s) << where;
              ASSERT_LT(op.micro_batch, m) << where;
              const int slot = op.kind == O::kForward ? 0 : op.kind == O::kBackwardWeight ? 2 : 1;
              if (op.kind != O::kForward) {
                ASSERT_EQ(op.kind == O::kBackwardInput || op.kind == O::kBackwardWeight, split) << where;
              }
              ++count[slot][op.chunk * m + op.micro_batch];
            }
            for (int c = s; c < shape.chunks(); c += pp) {
              for (int mb = 0; mb < m; ++mb) {
                for (int slot = 0; slot < (split ? 3 : 2); ++slot) {
                  ASSERT_EQ(count[slot][c * m + mb], 1) << where << " stage " << s << " chunk " << c << " mb " << mb;
                }
              }
            }
            EXPECT_EQ(schedule[s].size(), static_cast<size_t>((split ? 3 : 2) * v * m)) << where;
          }
          const int n = 1 + (pp + m + v) % 3;  // units per chunk
          absl::StatusOr<ScheduleTimeline> t =
              SimulatePipelineSchedule(schedule, shape, ChunkCosts::PerUnit(std::vector<int>(shape.chunks(), n)));
          ASSERT_TRUE(t.ok()) << where << ": " << t.status();
          double closed = static_cast<double>(pp - 1) / (m + pp - 1);
          if (kind == K::kInterleaved1F1B) closed = static_cast<double>(pp - 1) / (v * m + pp - 1);
          if (kind == K::kZeroBubbleH1) closed = static_cast<double>(pp - 1) / (3 * m + pp - 1);
          for (int s = 0; s < pp; ++s) {
            EXPECT_EQ(t->bubble[s], closed) << where << " stage " << s;
            EXPECT_EQ(t->busy[s], 3.0 * n * v * m) << where << " stage " << s;
            const int peak = t->peak_in_flight[s];
            switch (kind) {
              case K::kGpipe:
                EXPECT_EQ(peak, m) << where << " stage " << s;
                break;
              case K::kOneFOneB:
                EXPECT_LE(peak, pp - s) << where << " stage " << s;
                EXPECT_EQ(peak, std::min(pp - s, m)) << where << " stage " << s;
                break;
              case K::kInterleaved1F1B:
                EXPECT_EQ(peak, std::min((pp - s - 1) * 2 + (v - 1) * pp + 1, m * v)) << where << " stage " << s;
                break;
              case K::kZeroBubbleH1:
                // (p - 1)(T_F + T_B - T_W) idle with T = n, and 1F1B's peak
                // (stage 0's pp) on every stage.
                EXPECT_EQ(t->makespan - t->busy[s], (pp - 1) * n) << where << " stage " << s;
                EXPECT_EQ(peak, pp) << where << " stage " << s;
                break;
            }
          }
          EXPECT_EQ(t->overall_bubble, closed) << where;
          if (pp == 1) {
            EXPECT_EQ(t->overall_bubble, 0) << where;
          }
        }
      }
    }
  }
  // GPipe and 1F1B: every pp and m; interleaved: m a multiple of pp, v > 1;
  // ZB-H1: m >= pp.
  int interleaved = 0, zero_bubble = 0;
  for (int pp = 1; pp <= 8; ++pp) {
    interleaved += 3 * (16 / pp);
    zero_bubble += 16 - pp + 1;
  }
  EXPECT_EQ(accepted, 2 * 8 * 16 + interleaved + zero_bubble);
}

TEST(PipelineScheduleTest, RejectedShapesNameTheConfigFields) {
  EXPECT_EQ(ShapeError(K::kInterleaved1F1B, Shape(4, 6, 2)),
            "engine.parallel.pipeline_schedule: INTERLEAVED_1F1B needs engine.gradient_accumulation_steps (6) to be "
            "a multiple of engine.parallel.pp (4)");
  EXPECT_EQ(ShapeError(K::kInterleaved1F1B, Shape(4, 8, 1)),
            "engine.parallel.pipeline_schedule: INTERLEAVED_1F1B needs engine.parallel.virtual_stages > 1 (is 1)");
  EXPECT_EQ(ShapeError(K::kOneFOneB, Shape(4, 8, 2)),
            "engine.parallel.virtual_stages: 2 needs engine.parallel.pipeline_schedule INTERLEAVED_1F1B (is "
            "ONE_F_ONE_B)");
  EXPECT_EQ(ShapeError(K::kGpipe, Shape(2, 8, 3)),
            "engine.parallel.virtual_stages: 3 needs engine.parallel.pipeline_schedule INTERLEAVED_1F1B (is GPIPE)");
  EXPECT_EQ(ShapeError(K::kZeroBubbleH1, Shape(4, 8, 2)),
            "engine.parallel.virtual_stages: 2 needs engine.parallel.pipeline_schedule INTERLEAVED_1F1B (is "
            "ZERO_BUBBLE_H1)");
  EXPECT_EQ(ShapeError(K::kZeroBubbleH1, Shape(4, 2)),
            "engine.parallel.pipeline_schedule: ZERO_BUBBLE_H1 needs engine.gradient_accumulation_steps (2) >= "
            "engine.parallel.pp (4)");
  EXPECT_EQ(ShapeError(K::kOneFOneB, Shape(0, 2)), "engine.parallel.pp: 0 is out of range; expected >= 1");
  EXPECT_EQ(ShapeError(K::kOneFOneB, Shape(2, 0)),
            "engine.gradient_accumulation_steps: 0 is out of range; expected >= 1");
  EXPECT_EQ(ShapeError(K::kOneFOneB, Shape(2, 2, 0)),
            "engine.parallel.virtual_stages: 0 is out of range; expected >= 1");
  // The degenerate pipeline and the boundaries are accepted.
  EXPECT_EQ(ShapeError(K::kGpipe, Shape(1, 1)), "ok");
  EXPECT_EQ(ShapeError(K::kZeroBubbleH1, Shape(4, 4)), "ok");
  EXPECT_EQ(ShapeError(K::kInterleaved1F1B, Shape(1, 3, 2)), "ok");
  EXPECT_EQ(ShapeError(K::kOneFOneB, Shape(8, 1)), "ok");
}

TEST(PipelineScheduleTest, OrdersPerStage) {
  std::vector<std::vector<ChunkOp>> s = Build(K::kGpipe, Shape(2, 3));
  EXPECT_EQ(Text(s[1]), "F(1,0) F(1,1) F(1,2) BW(1,0) BW(1,1) BW(1,2)");
  s = Build(K::kOneFOneB, Shape(4, 6));
  EXPECT_EQ(Text(s[0]), "F(0,0) F(0,1) F(0,2) F(0,3) BW(0,0) F(0,4) BW(0,1) F(0,5) BW(0,2) BW(0,3) BW(0,4) BW(0,5)");
  EXPECT_EQ(Text(s[2]), "F(2,0) F(2,1) BW(2,0) F(2,2) BW(2,1) F(2,3) BW(2,2) F(2,4) BW(2,3) F(2,5) BW(2,4) BW(2,5)");
  EXPECT_EQ(Text(s[3]), "F(3,0) BW(3,0) F(3,1) BW(3,1) F(3,2) BW(3,2) F(3,3) BW(3,3) F(3,4) BW(3,4) F(3,5) BW(3,5)");
  // Fewer micro-batches than the warm-up wants: all forwards first.
  EXPECT_EQ(Text(Build(K::kOneFOneB, Shape(4, 2))[0]), "F(0,0) F(0,1) BW(0,0) BW(0,1)");
  // Megatron's interleaving at pp 2, v 2, m 4: stage 0 warms up with
  // (2 - 0 - 1)·2 + (2 - 1)·2 = 4 forwards, stage 1 with 2; chunks in
  // groups of pp micro-batches, backwards from the last chunk.
  s = Build(K::kInterleaved1F1B, Shape(2, 4, 2));
  EXPECT_EQ(Text(s[0]),
            "F(0,0) F(0,1) F(2,0) F(2,1) F(0,2) BW(2,0) F(0,3) BW(2,1) F(2,2) BW(0,0) F(2,3) BW(0,1) "
            "BW(2,2) BW(2,3) BW(0,2) BW(0,3)");
  EXPECT_EQ(Text(s[1]),
            "F(1,0) F(1,1) F(3,0) BW(3,0) F(3,1) BW(3,1) F(1,2) BW(1,0) F(1,3) BW(1,1) F(3,2) BW(3,2) "
            "F(3,3) BW(3,3) BW(1,2) BW(1,3)");
  // pp 4, v 2, m 8: stage 0's warm-up is 6 + 4 = 10 forwards.
  s = Build(K::kInterleaved1F1B, Shape(4, 8, 2));
  EXPECT_EQ(Text(std::vector<ChunkOp>(s[0].begin(), s[0].begin() + 14)),
            "F(0,0) F(0,1) F(0,2) F(0,3) F(4,0) F(4,1) F(4,2) F(4,3) F(0,4) F(0,5) F(0,6) BW(4,0) F(0,7) BW(4,1)");
  // ZB-H1 at pp 3, m 4: stage s runs W of mb i after the B of mb i + s.
  s = Build(K::kZeroBubbleH1, Shape(3, 4));
  EXPECT_EQ(Text(s[0]), "F(0,0) F(0,1) F(0,2) B(0,0) W(0,0) F(0,3) B(0,1) W(0,1) B(0,2) W(0,2) B(0,3) W(0,3)");
  EXPECT_EQ(Text(s[1]), "F(1,0) F(1,1) B(1,0) F(1,2) B(1,1) W(1,0) F(1,3) B(1,2) W(1,1) B(1,3) W(1,2) W(1,3)");
  EXPECT_EQ(Text(s[2]), "F(2,0) B(2,0) F(2,1) B(2,1) F(2,2) B(2,2) W(2,0) F(2,3) B(2,3) W(2,1) W(2,2) W(2,3)");
}

std::string Drawn(K kind, const PipelineShape& shape) { return DrawTimeline(Simulate(kind, shape), 0.5); }

// pp 2, m 4, one unit per chunk (F = B = W = 1, a fused backward 2), two
// characters per time unit.
TEST(PipelineScheduleTest, DrawnTimelines) {
  EXPECT_EQ(Drawn(K::kGpipe, Shape(2, 4)),
            "stage 0 |F0F1F2F3......B0bbB1bbB2bbB3bb|\n"
            "stage 1 |..F0F1F2F3B0bbB1bbB2bbB3bb....|\n");
  EXPECT_EQ(Drawn(K::kOneFOneB, Shape(2, 4)),
            "stage 0 |F0F1....B0bbF2B1bbF3B2bb..B3bb|\n"
            "stage 1 |..F0B0bbF1B1bbF2B2bbF3B3bb....|\n");
  EXPECT_EQ(Drawn(K::kInterleaved1F1B, Shape(2, 4, 2)),
            "stage 0 |F0F1F0F1F2..B0bbF3B1bbF2B0bbF3B1bb..B2bb..B3bbB2bbB3bb|\n"
            "stage 1 |..F0F1F0B0bbF1B1bbF2B0bbF3B1bbF2B2bbF3B3bbB2bbB3bb....|\n");
  EXPECT_EQ(Drawn(K::kZeroBubbleH1, Shape(2, 4)),
            "stage 0 |F0F1..B0W0F2B1W1F3B2W2B3W3|\n"
            "stage 1 |..F0B0F1B1W0F2B2W1F3B3W2W3|\n");
  // One stage: no idle time.
  EXPECT_EQ(Drawn(K::kOneFOneB, Shape(1, 2)), "stage 0 |F0B0bbF1B1bb|\n");
  // One character per time unit: the micro-batch fits in a fused backward only.
  EXPECT_EQ(DrawTimeline(Simulate(K::kOneFOneB, Shape(2, 2))), "stage 0 |FF..B0.B1|\nstage 1 |.FB0FB1..|\n");
  // Ten stages: the numbers line up; wide micro-batch numbers are left out.
  ScheduleTimeline wide = Simulate(K::kGpipe, Shape(11, 12));
  const std::string drawn = DrawTimeline(wide, 0.5);
  EXPECT_EQ(drawn.substr(0, drawn.find('\n')).substr(0, 40), "stage  0 |F0F1F2F3F4F5F6F7F8F9FfFf......");
  EXPECT_NE(drawn.find("\nstage 10 |....................F0"), std::string::npos) << drawn;
}

std::string SimulationError(const std::vector<std::vector<ChunkOp>>& schedule, const PipelineShape& shape,
                            absl::StatusCode code) {
  absl::StatusOr<ScheduleTimeline> t =
      SimulatePipelineSchedule(schedule, shape, ChunkCosts::PerUnit(std::vector<int>(shape.chunks(), 1)));
  if (t.ok()) return "ok";
  EXPECT_EQ(t.status().code(), code) << t.status();
  return std::string(t.status().message());
}

TEST(PipelineScheduleTest, SimulationRejectsMalformedSchedulesAndNamesDeadlocks) {
  const PipelineShape shape = Shape(2, 2);
  auto invalid = [&](const std::vector<std::vector<ChunkOp>>& s) {
    return SimulationError(s, shape, absl::StatusCode::kInvalidArgument);
  };
  std::vector<std::vector<ChunkOp>> s = Build(K::kOneFOneB, shape);
  s[0].pop_back();
  EXPECT_EQ(invalid(s), "BW chunk 0 mb 1 is missing from stage 0");
  s = Build(K::kOneFOneB, shape);
  s[1].push_back(s[1].front());
  EXPECT_EQ(invalid(s), "stage 1 runs F chunk 1 mb 0 twice");
  s = Build(K::kOneFOneB, shape);
  s[1][0].chunk = 0;
  EXPECT_EQ(invalid(s), "stage 1 runs F chunk 0 mb 0, which belongs to stage 0");
  s = Build(K::kOneFOneB, shape);
  s[0][0].micro_batch = 2;
  EXPECT_EQ(invalid(s), "stage 0 runs F chunk 0 mb 2, expected chunk in [0, 2) and mb in [0, 2)");
  s = Build(K::kOneFOneB, shape);
  s[0].back().kind = O::kBackwardInput;
  EXPECT_EQ(invalid(s), "the schedule mixes fused backwards (BW) with split ones (B, W); expected one or the other");
  s = Build(K::kZeroBubbleH1, shape);
  s[1].pop_back();
  EXPECT_EQ(invalid(s), "W chunk 1 mb 1 is missing from stage 1");
  EXPECT_EQ(invalid({s[0]}), "the schedule has 1 stages, expected 2");
  ChunkCosts costs = ChunkCosts::PerUnit({1});
  EXPECT_EQ(SimulatePipelineSchedule(Build(K::kOneFOneB, shape), shape, costs).status().message(),
            "costs list 1 chunks, expected 2");
  costs = ChunkCosts::PerUnit({1, 1});
  costs.backward_weight[1] = -1;
  EXPECT_EQ(SimulatePipelineSchedule(Build(K::kOneFOneB, shape), shape, costs).status().message(),
            "a chunk costs -1, expected >= 0");

  // Stage 0 starts with a backward that needs stage 1's, which waits for a
  // forward stage 0 has not run.
  s = Build(K::kOneFOneB, shape);
  std::swap(s[0][0], s[0][2]);
  EXPECT_EQ(s[0][0].kind, O::kBackward);
  EXPECT_EQ(SimulationError(s, shape, absl::StatusCode::kFailedPrecondition),
            "deadlock: stage 0 waits at BW chunk 0 mb 0 for F chunk 0 mb 0 (stage 0); stage 1 waits at F chunk 1 mb 0 "
            "for F chunk 0 mb 0 (stage 0)");
  // A W before its B.
  s = Build(K::kZeroBubbleH1, Shape(1, 1));
  std::swap(s[0][1], s[0][2]);
  EXPECT_EQ(SimulationError(s, Shape(1, 1), absl::StatusCode::kFailedPrecondition),
            "deadlock: stage 0 waits at W chunk 0 mb 0 for B chunk 0 mb 0 (stage 0)");
}

TEST(PipelineScheduleTest, UnequalCostsAndTimes) {
  // 1F1B at pp 2, m 2 with chunk 1 twice as expensive: stage 0 waits for it.
  const PipelineShape shape = Shape(2, 2);
  ChunkCosts costs = ChunkCosts::PerUnit({1, 2});
  absl::StatusOr<ScheduleTimeline> t = SimulatePipelineSchedule(Build(K::kOneFOneB, shape), shape, costs);
  ASSERT_TRUE(t.ok()) << t.status();
  // Stage 1: F0 [1, 3], BW0 [3, 7], F1 [7, 9], BW1 [9, 13]; stage 0: F0
  // [0, 1], F1 [1, 2], BW0 [7, 9], BW1 [13, 15].
  EXPECT_EQ(t->makespan, 15);
  EXPECT_EQ(t->busy, (std::vector<double>{6, 12}));
  EXPECT_EQ(t->bubble, (std::vector<double>{9.0 / 15, 3.0 / 15}));
  EXPECT_EQ(t->overall_bubble, 12.0 / 30);
  ASSERT_EQ(t->stages[0].size(), 4u);
  EXPECT_EQ(t->stages[0][2].start, 7);
  EXPECT_EQ(t->stages[0][3].end, 15);
  EXPECT_EQ(DrawTimeline(*t), "stage 0 |FF.....B0....B1|\nstage 1 |.F0B0bbF1B1bb..|\n");
  EXPECT_EQ(ChunkCosts::PerUnit({3, 0}).backward_weight, (std::vector<double>{3, 0}));
}

TEST(PipelineScheduleTest, TransfersDelayTheStageThatWaits) {
  // 1F1B at pp 2, m 2, every chunk 1 for F and BW (B 1, W 0), boundary 0.5.
  const PipelineShape shape = Shape(2, 2);
  ChunkCosts costs = ChunkCosts::PerUnit({1, 1});
  costs.backward_weight = {0, 0};
  costs.transfer = {0.5};
  absl::StatusOr<ScheduleTimeline> t = SimulatePipelineSchedule(Build(K::kOneFOneB, shape), shape, costs);
  ASSERT_TRUE(t.ok()) << t.status();
  // Stage 0: F0 [0, 1], F1 [1, 2], BW0 [4, 5], BW1 [6, 7]; stage 1: F0
  // [1.5, 2.5], BW0 [2.5, 3.5], F1 [3.5, 4.5], BW1 [4.5, 5.5].
  EXPECT_EQ(t->makespan, 7);
  EXPECT_EQ(t->stages[1][0].start, 1.5);
  EXPECT_EQ(t->stages[1][2].start, 3.5);
  EXPECT_EQ(t->stages[0][2].start, 4);
  EXPECT_EQ(t->stages[0][3].start, 6);
  EXPECT_EQ(t->busy, (std::vector<double>{4, 4}));
  EXPECT_EQ(TransferSeconds(1000, 0.5, 100), 10.5);
  EXPECT_EQ(TransferSeconds(1000, 0.5, 0), 0.5);
  costs.transfer = {0.5, 0.5};
  EXPECT_EQ(SimulatePipelineSchedule(Build(K::kOneFOneB, shape), shape, costs).status().message(),
            "transfer costs list 2 chunk boundaries, expected none or 1");
  costs.transfer = {-1};
  EXPECT_EQ(SimulatePipelineSchedule(Build(K::kOneFOneB, shape), shape, costs).status().message(),
            "a transfer costs -1, expected >= 0");
}

TEST(PipelineScheduleTest, Names) {
  EXPECT_STREQ(PipelineScheduleName(K::kGpipe), "GPIPE");
  EXPECT_STREQ(PipelineScheduleName(K::kOneFOneB), "ONE_F_ONE_B");
  EXPECT_STREQ(PipelineScheduleName(K::kInterleaved1F1B), "INTERLEAVED_1F1B");
  EXPECT_STREQ(PipelineScheduleName(K::kZeroBubbleH1), "ZERO_BUBBLE_H1");
  EXPECT_STREQ(ChunkOpKindName(O::kForward), "F");
  EXPECT_STREQ(ChunkOpKindName(O::kBackward), "BW");
  EXPECT_STREQ(ChunkOpKindName(O::kBackwardInput), "B");
  EXPECT_STREQ(ChunkOpKindName(O::kBackwardWeight), "W");
}

}  // namespace
}  // namespace zeroshard

#include "engine/data_parallel_program.h"

#include <string>
#include <vector>

#include "comm/comm_stats.h"
#include "engine/step_program.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Four units a..d (gather bytes 100..400, each needing itself) in three
// buckets formed backward like GradReducer's: {d}, {c}, {a, b}.
std::vector<ProgramUnit> Units() {
  std::vector<ProgramUnit> units(4);
  const char* names[] = {"a", "b", "c", "d"};
  for (int u = 0; u < 4; ++u) {
    units[u].name = names[u];
    units[u].needs = {u};
    units[u].gather_bytes = 100 * (u + 1);
  }
  return units;
}

std::vector<ProgramBucket> Buckets() { return {{{3}, 40, "d"}, {{2}, 30, "c"}, {{0, 1}, 30, "a..b"}}; }

DataParallelProgramOptions Options(int stage) {
  DataParallelProgramOptions o;
  o.zero = *ZeroPolicy::ForStage(stage);
  return o;
}

// A program's expected text, written from the line after R"(.
std::string Program(const char* text) { return text[0] == '\n' ? text + 1 : text; }

std::string Text(const std::vector<ProgramUnit>& units, const std::vector<ProgramBucket>& buckets,
                 const DataParallelProgramOptions& options) {
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, buckets, options);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? FormatProgram(*p) : "";
}

std::string Error(const std::vector<ProgramUnit>& units, const std::vector<ProgramBucket>& buckets,
                  const DataParallelProgramOptions& options) {
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, buckets, options);
  if (p.ok()) return "ok";
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(p.status().message());
}

TEST(DataParallelProgramTest, Stage3Prefetch1ReshardsAfterForward) {
  // b's gather is issued with a's; every unit but the last is gathered again
  // for its backward (the last stays gathered across the turnaround); one
  // bucket stays in flight while the next unit computes.
  EXPECT_EQ(Text(Units(), Buckets(), Options(3)), Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
RELEASE unit=a
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
RELEASE unit=b
GATHER unit=d bytes=400
WAIT_GATHER unit=c
FORWARD mb=0 unit=c
RELEASE unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
GATHER unit=c bytes=300
BACKWARD mb=0 unit=d
RELEASE unit=d
REDUCE bucket=d bytes=40
GATHER unit=b bytes=200
WAIT_GATHER unit=c
BACKWARD mb=0 unit=c
RELEASE unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
GATHER unit=a bytes=100
WAIT_GATHER unit=b
BACKWARD mb=0 unit=b
RELEASE unit=b
WAIT_GATHER unit=a
BACKWARD mb=0 unit=a
RELEASE unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
}

TEST(DataParallelProgramTest, Stage3WithoutReshardKeepsUnitsFromForwardToBackward) {
  DataParallelProgramOptions o = Options(3);
  o.reshard_after_forward = false;
  EXPECT_EQ(Text(Units(), Buckets(), o), Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
GATHER unit=d bytes=400
WAIT_GATHER unit=c
FORWARD mb=0 unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
RELEASE unit=d
REDUCE bucket=d bytes=40
BACKWARD mb=0 unit=c
RELEASE unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
BACKWARD mb=0 unit=b
RELEASE unit=b
BACKWARD mb=0 unit=a
RELEASE unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
}

TEST(DataParallelProgramTest, Stage3Prefetch2AndPrefetch0) {
  DataParallelProgramOptions o = Options(3);
  o.prefetch = 2;
  EXPECT_EQ(Text(Units(), Buckets(), o), Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
GATHER unit=c bytes=300
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
RELEASE unit=a
GATHER unit=d bytes=400
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
RELEASE unit=b
WAIT_GATHER unit=c
FORWARD mb=0 unit=c
RELEASE unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
GATHER unit=c bytes=300
GATHER unit=b bytes=200
BACKWARD mb=0 unit=d
RELEASE unit=d
REDUCE bucket=d bytes=40
GATHER unit=a bytes=100
WAIT_GATHER unit=c
BACKWARD mb=0 unit=c
RELEASE unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
WAIT_GATHER unit=b
BACKWARD mb=0 unit=b
RELEASE unit=b
WAIT_GATHER unit=a
BACKWARD mb=0 unit=a
RELEASE unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
  o.prefetch = 0;
  o.training = false;
  EXPECT_EQ(Text(Units(), Buckets(), o), Program(R"(
GATHER unit=a bytes=100
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
RELEASE unit=a
GATHER unit=b bytes=200
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
RELEASE unit=b
GATHER unit=c bytes=300
WAIT_GATHER unit=c
FORWARD mb=0 unit=c
RELEASE unit=c
GATHER unit=d bytes=400
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
RELEASE unit=d
)"));
}

TEST(DataParallelProgramTest, Stage3PersistentUnitIsGatheredOnceAndReleasedAtTheEnd) {
  std::vector<ProgramUnit> units = Units();
  units[1].persistent = true;
  // b: gathered once, kept through both passes, released at the end of the program.
  EXPECT_EQ(Text(units, Buckets(), Options(3)), Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
RELEASE unit=a
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
GATHER unit=d bytes=400
WAIT_GATHER unit=c
FORWARD mb=0 unit=c
RELEASE unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
GATHER unit=c bytes=300
BACKWARD mb=0 unit=d
RELEASE unit=d
REDUCE bucket=d bytes=40
WAIT_GATHER unit=c
BACKWARD mb=0 unit=c
RELEASE unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
GATHER unit=a bytes=100
BACKWARD mb=0 unit=b
WAIT_GATHER unit=a
BACKWARD mb=0 unit=a
RELEASE unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
RELEASE unit=b
)"));
}

TEST(DataParallelProgramTest, CheckpointedUnitRecomputesRightBeforeItsBackward) {
  std::vector<ProgramUnit> units = Units();
  units[1].checkpointed = true;
  EXPECT_EQ(Text(units, Buckets(), Options(2)), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
REDUCE bucket=d bytes=40
BACKWARD mb=0 unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
RECOMPUTE mb=0 unit=b
BACKWARD mb=0 unit=b
BACKWARD mb=0 unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
  // Stage 3: after the unit's parameters are waited for.
  const std::string s3 = Text(units, Buckets(), Options(3));
  EXPECT_NE(s3.find("GATHER unit=a bytes=100\nWAIT_GATHER unit=b\nRECOMPUTE mb=0 unit=b\nBACKWARD mb=0 unit=b\n"),
            std::string::npos)
      << s3;
  // An evaluation never recomputes.
  DataParallelProgramOptions eval = Options(2);
  eval.training = false;
  EXPECT_EQ(Text(units, Buckets(), eval), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
)"));
}

TEST(DataParallelProgramTest, TwoMicroBatchesAccumulateReducesEachDeferOnlyTheLast) {
  DataParallelProgramOptions o = Options(2);
  o.micro_batches = 2;
  const std::string forward1 = Program(R"(
FORWARD mb=1 unit=a
FORWARD mb=1 unit=b
FORWARD mb=1 unit=c
FORWARD mb=1 unit=d
)");
  const std::string backward1 = Program(R"(
BACKWARD mb=1 unit=d
REDUCE bucket=d bytes=40
BACKWARD mb=1 unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
BACKWARD mb=1 unit=b
BACKWARD mb=1 unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)");
  EXPECT_EQ(Text(Units(), Buckets(), o), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
REDUCE bucket=d bytes=40
BACKWARD mb=0 unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
BACKWARD mb=0 unit=b
BACKWARD mb=0 unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)") + forward1 + backward1);
  o.reduce_every_micro_batch = false;
  EXPECT_EQ(Text(Units(), Buckets(), o), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
BACKWARD mb=0 unit=c
BACKWARD mb=0 unit=b
BACKWARD mb=0 unit=a
)") + forward1 + backward1);
}

TEST(DataParallelProgramTest, Stage3TwoMicroBatchesDeferRegathersForTheSecond) {
  std::vector<ProgramUnit> units = Units();
  units[1].checkpointed = true;
  DataParallelProgramOptions o = Options(3);
  o.micro_batches = 2;
  o.reduce_every_micro_batch = false;
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, Buckets(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->micro_batches, 2);
  int gathers = 0, reduces = 0, recomputes = 0;
  for (const Action& a : p->actions) {
    gathers += a.kind == ActionKind::kGather;
    reduces += a.kind == ActionKind::kReduce;
    recomputes += a.kind == ActionKind::kRecompute;
  }
  EXPECT_EQ(gathers, 14);  // every unit but the last twice per micro-batch
  EXPECT_EQ(reduces, 3);
  EXPECT_EQ(recomputes, 2);
  // The first micro-batch's backward ends without a reduction; the second
  // forward gathers again from scratch.
  const std::string text = FormatProgram(*p);
  EXPECT_NE(text.find("BACKWARD mb=0 unit=a\nRELEASE unit=a\nGATHER unit=a bytes=100\nGATHER unit=b bytes=200\n"
                      "WAIT_GATHER unit=a\nFORWARD mb=1 unit=a\n"),
            std::string::npos)
      << text;
}

TEST(DataParallelProgramTest, Stage1ReducesEverythingAfterTheBackwardStages0And2AsBucketsClose) {
  EXPECT_EQ(Text(Units(), Buckets(), Options(1)), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
BACKWARD mb=0 unit=c
BACKWARD mb=0 unit=b
BACKWARD mb=0 unit=a
REDUCE bucket=d bytes=40
REDUCE bucket=c bytes=30
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=d
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
  // Stages 0 and 2 reduce each bucket as its last backward ends.
  const std::string stage2 = Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
REDUCE bucket=d bytes=40
BACKWARD mb=0 unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
BACKWARD mb=0 unit=b
BACKWARD mb=0 unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)");
  EXPECT_EQ(Text(Units(), Buckets(), Options(2)), stage2);
  EXPECT_EQ(Text(Units(), Buckets(), Options(0)), stage2);
}

TEST(DataParallelProgramTest, StagesBelow3NeverGather) {
  std::vector<ProgramUnit> units = Units();
  units[3].needs = {3, 0};
  units[2].persistent = true;
  for (int stage = 0; stage < 3; ++stage) {
    for (bool training : {true, false}) {
      DataParallelProgramOptions o = Options(stage);
      o.training = training;
      o.prefetch = 2;
      absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, Buckets(), o);
      ASSERT_TRUE(p.ok()) << p.status();
      for (const Action& a : p->actions) {
        EXPECT_TRUE(a.kind != ActionKind::kGather && a.kind != ActionKind::kWaitGather &&
                    a.kind != ActionKind::kRelease)
            << "stage " << stage << ": " << FormatAction(*p, a);
      }
    }
  }
}

TEST(DataParallelProgramTest, TiedWeightHoldsTheOwnerAcrossThePass) {
  // GPT-2: the head (d) reads the embedding's (a) wte.
  std::vector<ProgramUnit> units = Units();
  units[3].needs = {3, 0};
  // a stays gathered from its forward through the head's forward and
  // backward (the turnaround) to its own backward: one gather for the step.
  EXPECT_EQ(Text(units, Buckets(), Options(3)), Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
RELEASE unit=b
GATHER unit=d bytes=400
WAIT_GATHER unit=c
FORWARD mb=0 unit=c
RELEASE unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
GATHER unit=c bytes=300
BACKWARD mb=0 unit=d
RELEASE unit=d
REDUCE bucket=d bytes=40
GATHER unit=b bytes=200
WAIT_GATHER unit=c
BACKWARD mb=0 unit=c
RELEASE unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
WAIT_GATHER unit=b
BACKWARD mb=0 unit=b
RELEASE unit=b
BACKWARD mb=0 unit=a
RELEASE unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
  // The owner's bucket still closes at its own lowest unit (a is below d).
  EXPECT_EQ(BucketCloseUnits(units, Buckets()), std::vector<int>({3, 2, 0}));
}

TEST(DataParallelProgramTest, BorrowingFromALaterUnitClosesTheOwnersBucketAtTheBorrower) {
  std::vector<ProgramUnit> units = Units();
  units[1].needs = {1, 2};  // b reads c's parameters and adds to c's gradient
  EXPECT_EQ(BucketCloseUnits(units, Buckets()), std::vector<int>({3, 1, 0}));
  EXPECT_EQ(Text(units, Buckets(), Options(2)), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
REDUCE bucket=d bytes=40
BACKWARD mb=0 unit=c
BACKWARD mb=0 unit=b
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
BACKWARD mb=0 unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
  // Stage 3: c is released after its own forward (its last forward use) but
  // only after b's backward (its last backward use).
  EXPECT_EQ(Text(units, Buckets(), Options(3)), Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
GATHER unit=c bytes=300
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
RELEASE unit=a
WAIT_GATHER unit=b
WAIT_GATHER unit=c
FORWARD mb=0 unit=b
RELEASE unit=b
GATHER unit=d bytes=400
FORWARD mb=0 unit=c
RELEASE unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
GATHER unit=c bytes=300
BACKWARD mb=0 unit=d
RELEASE unit=d
REDUCE bucket=d bytes=40
GATHER unit=b bytes=200
WAIT_GATHER unit=c
BACKWARD mb=0 unit=c
GATHER unit=a bytes=100
WAIT_GATHER unit=b
BACKWARD mb=0 unit=b
RELEASE unit=b
RELEASE unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
WAIT_GATHER unit=a
BACKWARD mb=0 unit=a
RELEASE unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
}

TEST(DataParallelProgramTest, BucketsClosingAtOneUnitLaunchInBucketOrderEachWaitingThePrevious) {
  std::vector<ProgramUnit> units = Units();
  units[1].needs = {1, 2, 3};
  EXPECT_EQ(BucketCloseUnits(units, Buckets()), std::vector<int>({1, 1, 0}));
  EXPECT_EQ(Text(units, Buckets(), Options(2)), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
BACKWARD mb=0 unit=c
BACKWARD mb=0 unit=b
REDUCE bucket=d bytes=40
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
BACKWARD mb=0 unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
}

TEST(DataParallelProgramTest, FrozenLeadingUnitHasNoBackwardNorPrefetch) {
  std::vector<ProgramUnit> units = Units();
  units[0].backward = false;
  // a..b closes at b, the lowest unit of it that runs backward.
  EXPECT_EQ(BucketCloseUnits(units, Buckets()), std::vector<int>({3, 2, 1}));
  // a has no backward: b's backward prefetches nothing.
  EXPECT_EQ(Text(units, Buckets(), Options(3)), Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
RELEASE unit=a
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
RELEASE unit=b
GATHER unit=d bytes=400
WAIT_GATHER unit=c
FORWARD mb=0 unit=c
RELEASE unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
GATHER unit=c bytes=300
BACKWARD mb=0 unit=d
RELEASE unit=d
REDUCE bucket=d bytes=40
GATHER unit=b bytes=200
WAIT_GATHER unit=c
BACKWARD mb=0 unit=c
RELEASE unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
WAIT_GATHER unit=b
BACKWARD mb=0 unit=b
RELEASE unit=b
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
}

TEST(DataParallelProgramTest, FrozenOnlyBucketsCloseAtTheLastBackwardOrAtTheEnd) {
  std::vector<ProgramUnit> units = Units();
  units[0].backward = false;
  units[1].backward = false;
  EXPECT_EQ(BucketCloseUnits(units, Buckets()), std::vector<int>({3, 2, 2}));
  EXPECT_EQ(Text(units, Buckets(), Options(2)), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
REDUCE bucket=d bytes=40
BACKWARD mb=0 unit=c
REDUCE bucket=c bytes=30
WAIT_REDUCE bucket=d
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
  for (ProgramUnit& u : units) u.backward = false;
  EXPECT_EQ(BucketCloseUnits(units, Buckets()), std::vector<int>({-1, -1, -1}));
  EXPECT_EQ(Text(units, Buckets(), Options(2)), Program(R"(
FORWARD mb=0 unit=a
FORWARD mb=0 unit=b
FORWARD mb=0 unit=c
FORWARD mb=0 unit=d
REDUCE bucket=d bytes=40
REDUCE bucket=c bytes=30
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=d
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
}

TEST(DataParallelProgramTest, EvaluationIsOneForwardWithTheSameGathersAndReleases) {
  std::vector<ProgramUnit> units = Units();
  units[3].needs = {3, 0};
  units[2].persistent = true;
  DataParallelProgramOptions o = Options(3);
  o.training = false;
  o.micro_batches = 4;  // an evaluation runs one micro-batch
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, Buckets(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->micro_batches, 1);
  EXPECT_EQ(FormatProgram(*p),
            Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
GATHER unit=c bytes=300
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
RELEASE unit=b
GATHER unit=d bytes=400
WAIT_GATHER unit=c
FORWARD mb=0 unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
RELEASE unit=d
RELEASE unit=a
RELEASE unit=c
)"));  // the persistent unit, at the end
}

TEST(DataParallelProgramTest, UnitsWithoutParametersAndEmptyBucketsMoveNothing) {
  std::vector<ProgramUnit> units = Units();
  units[2].gather_bytes = 0;
  units[2].needs = {};
  std::vector<ProgramBucket> buckets = Buckets();
  buckets[1].reduce_bytes = 0;
  // c is never gathered; its bucket's REDUCE stays in order, without a
  // collective.
  EXPECT_EQ(Text(units, buckets, Options(3)), Program(R"(
GATHER unit=a bytes=100
GATHER unit=b bytes=200
WAIT_GATHER unit=a
FORWARD mb=0 unit=a
RELEASE unit=a
WAIT_GATHER unit=b
FORWARD mb=0 unit=b
RELEASE unit=b
GATHER unit=d bytes=400
FORWARD mb=0 unit=c
WAIT_GATHER unit=d
FORWARD mb=0 unit=d
BACKWARD mb=0 unit=d
RELEASE unit=d
REDUCE bucket=d bytes=40
GATHER unit=b bytes=200
BACKWARD mb=0 unit=c
REDUCE bucket=c
WAIT_REDUCE bucket=d
GATHER unit=a bytes=100
WAIT_GATHER unit=b
BACKWARD mb=0 unit=b
RELEASE unit=b
WAIT_GATHER unit=a
BACKWARD mb=0 unit=a
RELEASE unit=a
REDUCE bucket=a..b bytes=30
WAIT_REDUCE bucket=c
WAIT_REDUCE bucket=a..b
)"));
  // A need of a unit without parameters is skipped too.
  units[3].needs = {3, 2};
  const std::string text = Text(units, buckets, Options(3));
  EXPECT_EQ(text.find("unit=c bytes"), std::string::npos) << text;
}

TEST(DataParallelProgramTest, ActionsCarryTheirCollectivesAndTheProgramItsNames) {
  std::vector<ProgramUnit> units = Units();
  units[1].needs = {1, 2};
  DataParallelProgramOptions o = Options(3);
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, Buckets(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_units, 4);
  EXPECT_EQ(p->num_buckets, 3);
  EXPECT_EQ(p->micro_batches, 1);
  EXPECT_EQ(p->names.units, std::vector<std::string>({"a", "b", "c", "d"}));
  EXPECT_EQ(p->names.buckets, std::vector<std::string>({"d", "c", "a..b"}));
  EXPECT_EQ(p->bucket_writers, std::vector<std::vector<int>>({{3}, {1, 2}, {0, 1}}));
  const Action& first = p->actions.front();
  EXPECT_EQ(first.kind, ActionKind::kGather);
  EXPECT_EQ(first.unit, 0);
  EXPECT_EQ(first.micro_batch, -1);
  EXPECT_EQ(first.issues, std::vector<IssuedCollective>({{"dp", CommOp::kAllGather, 100, "params a"}}));
  const Action& forward = p->actions[4];
  EXPECT_EQ(FormatAction(*p, forward), "FORWARD mb=0 unit=a");
  EXPECT_TRUE(forward.issues.empty());
  bool saw_reduce = false;
  for (const Action& a : p->actions) {
    if (a.kind != ActionKind::kReduce || a.bucket != 2) continue;
    saw_reduce = true;
    EXPECT_EQ(a.issues, std::vector<IssuedCollective>({{"dp", CommOp::kReduceScatter, 30, "grads a..b"}}));
  }
  EXPECT_TRUE(saw_reduce);
  EXPECT_EQ(p->actions.back().kind, ActionKind::kWaitReduce);
}

TEST(DataParallelProgramTest, CollectiveCountsMatchCommStats) {
  std::vector<ProgramUnit> units = Units();
  units[3].needs = {3, 0};
  DataParallelProgramOptions o = Options(3);
  o.micro_batches = 2;
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, Buckets(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  const CollectivesByGroup counted = CountCollectives(*p, {{"dp", 4}});
  ASSERT_EQ(counted.size(), 2u);
  // Per micro-batch: every unit once per pass, but the head's needs (d, and
  // a held from its forward) once for both; three buckets.
  CommStats expected;
  for (int m = 0; m < 2; ++m) {
    for (int64_t bytes : {100, 200, 200, 300, 300, 400}) expected.Record(CommOp::kAllGather, 4, bytes, false);
    for (int64_t bytes : {40, 30, 30}) expected.Record(CommOp::kReduceScatter, 4, bytes, false);
  }
  for (CommOp op : {CommOp::kAllGather, CommOp::kReduceScatter}) {
    const CollectiveTotals& t = counted.at({"dp", op});
    EXPECT_EQ(t.calls, expected[op].calls) << CommOpName(op);
    EXPECT_EQ(t.bytes_sent, expected[op].bytes_sent) << CommOpName(op);
  }
  EXPECT_EQ(counted.at({"dp", CommOp::kAllGather}).calls, 12);
  EXPECT_EQ(counted.at({"dp", CommOp::kAllGather}).bytes_sent, 3 * 2 * (1000 + 500));
  EXPECT_EQ(counted.at({"dp", CommOp::kReduceScatter}).bytes_sent, 3 * 2 * 100);
}

TEST(DataParallelProgramTest, RejectsInvalidInputsNamingTheValue) {
  DataParallelProgramOptions o = Options(3);
  o.micro_batches = 0;
  EXPECT_EQ(Error(Units(), Buckets(), o), "micro_batches is 0, expected >= 1");
  o = Options(3);
  o.prefetch = -1;
  EXPECT_EQ(Error(Units(), Buckets(), o), "prefetch is -1, expected >= 0");

  std::vector<ProgramUnit> units = Units();
  units[2].needs = {2, 4};
  EXPECT_EQ(Error(units, Buckets(), Options(2)), "unit 2 (c) needs unit 4, expected in [0, 4)");
  units[2].needs = {-1};
  EXPECT_EQ(Error(units, Buckets(), Options(2)), "unit 2 (c) needs unit -1, expected in [0, 4)");
  units = Units();
  units[1].gather_bytes = -8;
  EXPECT_EQ(Error(units, Buckets(), Options(3)), "unit 1 (b) has gather_bytes -8, expected >= 0");
  units = Units();
  units[2].backward = false;
  EXPECT_EQ(Error(units, Buckets(), Options(2)),
            "unit 2 (c) has backward false after unit 1 (b) with backward true; expected only a leading run of "
            "units without backward");

  std::vector<ProgramBucket> buckets = Buckets();
  buckets[2].units = {0, 1, 4};
  EXPECT_EQ(Error(Units(), buckets, Options(2)), "bucket 2 (a..b) lists unit 4, expected in [0, 4)");
  buckets = Buckets();
  buckets[1].units = {1, 2};
  EXPECT_EQ(Error(Units(), buckets, Options(2)), "unit 1 (b) is in buckets 1 and 2, expected in one");
  buckets = Buckets();
  buckets[0].reduce_bytes = -1;
  EXPECT_EQ(Error(Units(), buckets, Options(2)), "bucket 0 (d) has reduce_bytes -1, expected >= 0");
}

TEST(DataParallelProgramTest, EmptyModel) {
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram({}, {}, Options(3));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(FormatProgram(*p), "");
  EXPECT_TRUE(BucketCloseUnits({}, {}).empty());
}

}  // namespace
}  // namespace zeroshard

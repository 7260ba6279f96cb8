#include "engine/program_simulator.h"

#include <string>
#include <utility>
#include <vector>

#include "comm/comm_stats.h"
#include "engine/data_parallel_program.h"
#include "engine/optimizer_program.h"
#include "engine/step_program.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using K = ActionKind;

Action Act(ActionKind kind, int mb = -1, int unit = -1, int bucket = -1, int peer = -1,
           std::vector<IssuedCollective> issues = {}) {
  Action a;
  a.kind = kind;
  a.micro_batch = mb;
  a.unit = unit;
  a.bucket = bucket;
  a.peer_stage = peer;
  a.issues = std::move(issues);
  return a;
}

// The four units and three buckets of data_parallel_program_test.
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

// The built program, a training one ending with the norm's all-reduce.
StepProgram Build(const std::vector<ProgramUnit>& units, const DataParallelProgramOptions& options) {
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, Buckets(), options);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return StepProgram();
  if (options.training) {
    Action norm;
    norm.kind = ActionKind::kReduceNorm;
    norm.issues = {{"dp", CommOp::kAllReduce, 12, "norm, loss, overflow"}};
    p->actions.push_back(norm);
  }
  return *p;
}

// `n` data-parallel ranks running the same program.
std::vector<SimulatedRank> DataParallel(const StepProgram& program, int n, bool gathers) {
  std::vector<int> members;
  for (int r = 0; r < n; ++r) members.push_back(r);
  std::vector<SimulatedRank> ranks(n);
  for (SimulatedRank& r : ranks) {
    r.program = program;
    r.groups = {{"dp", members}};
    r.gathers_params = gathers;
  }
  return ranks;
}

// A hand-written program over Units()' names.
StepProgram Hand(std::vector<Action> actions, int micro_batches = 1) {
  StepProgram p;
  p.actions = std::move(actions);
  p.micro_batches = micro_batches;
  p.num_units = 4;
  p.num_buckets = 3;
  p.names.units = {"a", "b", "c", "d"};
  p.names.buckets = {"d", "c", "a..b"};
  return p;
}

std::string Failure(const std::vector<SimulatedRank>& ranks, absl::StatusCode code) {
  absl::StatusOr<Simulation> sim = SimulatePrograms(ranks);
  if (sim.ok()) return "ok";
  EXPECT_EQ(sim.status().code(), code) << sim.status();
  return std::string(sim.status().message());
}
std::string Violation(const std::vector<SimulatedRank>& ranks) {
  return Failure(ranks, absl::StatusCode::kFailedPrecondition);
}

struct Peaks {
  int gathered;
  int kept;
};

Peaks SimulatePeaks(const StepProgram& program, bool gathers) {
  absl::StatusOr<Simulation> sim = SimulatePrograms(DataParallel(program, 2, gathers));
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return {-1, -1};
  EXPECT_EQ(sim->ranks.size(), 2u);
  EXPECT_EQ(sim->ranks[0].peak_gathered_units, sim->ranks[1].peak_gathered_units);
  return {sim->ranks[0].peak_gathered_units, sim->ranks[0].peak_kept_activations};
}

TEST(ProgramSimulatorTest, Stage3PredictionsForTheBuiltPrograms) {
  absl::StatusOr<Simulation> sim = SimulatePrograms(DataParallel(Build(Units(), Options(3)), 2, true));
  ASSERT_TRUE(sim.ok()) << sim.status();
  ASSERT_EQ(sim->ranks.size(), 2u);
  for (const RankPrediction& p : sim->ranks) {
    EXPECT_EQ(p.peak_gathered_units, 2);  // the unit and the one prefetched
    EXPECT_EQ(p.peak_kept_activations, 4);
    EXPECT_EQ(p.actions, 36);
    // d, the last unit, stays gathered from its forward to its backward.
    EXPECT_EQ(p.actions_by_kind, (std::map<ActionKind, int>{{K::kForward, 4},
                                                            {K::kBackward, 4},
                                                            {K::kGather, 7},
                                                            {K::kWaitGather, 7},
                                                            {K::kRelease, 7},
                                                            {K::kReduce, 3},
                                                            {K::kWaitReduce, 3},
                                                            {K::kReduceNorm, 1}}));
    CommStats stats;
    for (int64_t bytes : {100, 200, 300, 400, 300, 200, 100}) stats.Record(CommOp::kAllGather, 2, bytes, false);
    for (int64_t bytes : {40, 30, 30}) stats.Record(CommOp::kReduceScatter, 2, bytes, false);
    stats.Record(CommOp::kAllReduce, 2, 12, false);
    ASSERT_EQ(p.collectives.size(), 3u);
    for (CommOp op : {CommOp::kAllGather, CommOp::kReduceScatter, CommOp::kAllReduce}) {
      EXPECT_EQ(p.collectives.at({"dp", op}).calls, stats[op].calls) << CommOpName(op);
      EXPECT_EQ(p.collectives.at({"dp", op}).bytes_sent, stats[op].bytes_sent) << CommOpName(op);
    }
  }
}

TEST(ProgramSimulatorTest, PeaksFollowPrefetchReshardPersistenceAndTiedOwners) {
  DataParallelProgramOptions o = Options(3);
  std::vector<ProgramUnit> tied = Units();
  tied[3].needs = {3, 0};
  Peaks p = SimulatePeaks(Build(tied, o), true);
  EXPECT_EQ(p.gathered, 3);  // two, plus the embedding held for the head
  std::vector<ProgramUnit> persistent = Units();
  persistent[1].persistent = true;
  EXPECT_EQ(SimulatePeaks(Build(persistent, o), true).gathered, 3);
  o.prefetch = 0;
  EXPECT_EQ(SimulatePeaks(Build(Units(), o), true).gathered, 1);
  EXPECT_EQ(SimulatePeaks(Build(tied, o), true).gathered, 2);
  o.prefetch = 2;
  EXPECT_EQ(SimulatePeaks(Build(Units(), o), true).gathered, 3);
  o.prefetch = 1;
  o.reshard_after_forward = false;
  EXPECT_EQ(SimulatePeaks(Build(Units(), o), true).gathered, 4);  // everything, from forward to backward
}

TEST(ProgramSimulatorTest, KeptActivationsForMicroBatchesFrozenUnitsAndEvaluation) {
  DataParallelProgramOptions o = Options(2);
  std::vector<ProgramUnit> units = Units();
  units[1].checkpointed = true;  // its kept input is one entry, like saved activations
  Peaks p = SimulatePeaks(Build(units, o), false);
  EXPECT_EQ(p.gathered, 0);
  EXPECT_EQ(p.kept, 4);
  o.micro_batches = 2;
  o.reduce_every_micro_batch = false;
  EXPECT_EQ(SimulatePeaks(Build(units, o), false).kept, 4);  // one micro-batch at a time
  std::vector<ProgramUnit> frozen = Units();
  frozen[0].backward = false;
  EXPECT_EQ(SimulatePeaks(Build(frozen, Options(3)), true).kept, 3);
  DataParallelProgramOptions eval = Options(3);
  eval.training = false;
  p = SimulatePeaks(Build(Units(), eval), true);
  EXPECT_EQ(p.gathered, 2);
  EXPECT_EQ(p.kept, 0);
}

TEST(ProgramSimulatorTest, EveryBuiltProgramPasses) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (int variant = 0; variant < 6; ++variant) {
      std::vector<ProgramUnit> units = Units();
      DataParallelProgramOptions o = Options(stage);
      o.micro_batches = 1 + variant % 2;
      o.reduce_every_micro_batch = variant % 3 != 0;
      o.prefetch = variant % 3;
      o.reshard_after_forward = variant != 4;
      if (variant == 1) units[3].needs = {3, 0};
      if (variant == 2) units[1].needs = {1, 2, 3};
      if (variant == 3) units[0].backward = false;
      if (variant == 4) units[2].persistent = true;
      if (variant == 5) units[1].checkpointed = true;
      absl::StatusOr<Simulation> sim = SimulatePrograms(DataParallel(Build(units, o), 3, stage == 3));
      EXPECT_TRUE(sim.ok()) << "stage " << stage << " variant " << variant << ": " << sim.status();
    }
  }
}

TEST(ProgramSimulatorTest, RanksBuiltWithDifferentPrefetchIssueCollectivesInDifferentOrders) {
  std::vector<SimulatedRank> ranks = DataParallel(Build(Units(), Options(3)), 2, true);
  DataParallelProgramOptions o = Options(3);
  o.prefetch = 0;
  ranks[1].program = Build(Units(), o);
  // Rank 0 prefetches c's gather before it reduces d's bucket; rank 1 only
  // gathers c after.
  EXPECT_EQ(Violation(ranks),
            "rank 0 action 15 (GATHER unit=c bytes=300): AllGather of 300 bytes is collective 4 of group dp "
            "(ranks 0, 1), but rank 1 action 17 (REDUCE bucket=d bytes=40) issued ReduceScatter of 40 bytes there; "
            "a group's collectives must match in order, op and bytes on every member");
}

TEST(ProgramSimulatorTest, MismatchedBytesOfTheSameOp) {
  std::vector<SimulatedRank> ranks =
      DataParallel(Hand({Act(K::kReduceNorm, -1, -1, -1, -1, {{"dp", CommOp::kAllReduce, 12, "norm"}})}), 2, false);
  ranks[1].program.actions[0].issues[0].bytes_per_rank = 16;
  EXPECT_EQ(Violation(ranks),
            "rank 1 action 0 (REDUCE_NORM bytes=16): AllReduce of 16 bytes is collective 0 of group dp (ranks 0, 1), "
            "but rank 0 action 0 (REDUCE_NORM bytes=12) issued AllReduce of 12 bytes there; a group's collectives "
            "must match in order, op and bytes on every member");
}

// A blocking action waits for each of its collectives in turn: a rank blocked on
// one that issues the next when the last member arrives has moved, so
// this is no deadlock (an action may issue several, as PUBLISH issues one
// AllGather per unit of its bucket).
TEST(ProgramSimulatorTest, ABlockingActionWithSeveralCollectivesCompletesOnEveryRank) {
  std::vector<IssuedCollective> issues = {{"dp", CommOp::kAllReduce, 12, "norm, loss, overflow"}};
  for (int u = 0; u < 6; ++u) issues.push_back({"dp", CommOp::kAllGather, 20 + 4 * u, "params"});
  for (int n : {2, 3, 4}) {
    absl::StatusOr<Simulation> sim =
        SimulatePrograms(DataParallel(Hand({Act(K::kReduceNorm, -1, -1, -1, -1, issues)}), n, false));
    ASSERT_TRUE(sim.ok()) << n << " ranks: " << sim.status();
    for (const RankPrediction& p : sim->ranks) {
      EXPECT_EQ(p.actions, 1);
      EXPECT_EQ((p.collectives.at({"dp", CommOp::kAllGather}).calls), 6);
    }
  }
}

TEST(ProgramSimulatorTest, ACollectiveOneRankNeverIssuesIsADeadlock) {
  std::vector<SimulatedRank> ranks = DataParallel(Build(Units(), Options(2)), 2, false);
  ranks[1].program.actions.pop_back();  // no REDUCE_NORM
  EXPECT_EQ(Violation(ranks),
            "deadlock: rank 0 action 14 (REDUCE_NORM bytes=12) waits for AllReduce 3 of group dp (ranks 0, 1), not "
            "yet issued by rank 1; finished: rank 1");
}

// Two pipeline stages: rank 0 computes a, b and rank 1 c, d; two
// micro-batches, all forwards first (GPipe). b's output goes to c
// (SEND_ACT of b, RECV_ACT of c), c's input gradient back to b (SEND_GRAD
// of c, RECV_GRAD of b); each RECV is posted before its consumer.
std::vector<SimulatedRank> Pipeline() {
  const IssuedCollective send{"pp", CommOp::kSend, 64, "act"};
  const IssuedCollective recv{"pp", CommOp::kRecv, 64, "act"};
  const IssuedCollective norm{"world", CommOp::kAllReduce, 12, "norm, loss, overflow"};
  std::vector<SimulatedRank> ranks(2);
  ranks[0].program =
      Hand({Act(K::kForward, 0, 0), Act(K::kForward, 0, 1), Act(K::kSendAct, 0, 1, -1, 1, {send}),
            Act(K::kForward, 1, 0), Act(K::kForward, 1, 1), Act(K::kSendAct, 1, 1, -1, 1, {send}),
            Act(K::kRecvGrad, 0, 1, -1, 1, {recv}), Act(K::kBackward, 0, 1), Act(K::kBackward, 0, 0),
            Act(K::kRecvGrad, 1, 1, -1, 1, {recv}), Act(K::kBackward, 1, 1), Act(K::kBackward, 1, 0),
            Act(K::kReduce, -1, -1, 2), Act(K::kWaitReduce, -1, -1, 2), Act(K::kReduceNorm, -1, -1, -1, -1, {norm})},
           2);
  ranks[0].units = {0, 1};
  ranks[1].program = Hand(
      {Act(K::kRecvAct, 0, 2, -1, 0, {recv}), Act(K::kForward, 0, 2), Act(K::kForward, 0, 3), Act(K::kBackward, 0, 3),
       Act(K::kBackward, 0, 2), Act(K::kSendGrad, 0, 2, -1, 0, {send}), Act(K::kRecvAct, 1, 2, -1, 0, {recv}),
       Act(K::kForward, 1, 2), Act(K::kForward, 1, 3), Act(K::kBackward, 1, 3), Act(K::kBackward, 1, 2),
       Act(K::kSendGrad, 1, 2, -1, 0, {send}), Act(K::kReduce, -1, -1, 0), Act(K::kReduce, -1, -1, 1),
       Act(K::kWaitReduce, -1, -1, 0), Act(K::kWaitReduce, -1, -1, 1), Act(K::kReduceNorm, -1, -1, -1, -1, {norm})},
      2);
  ranks[1].units = {2, 3};
  for (SimulatedRank& r : ranks) {
    r.program.bucket_writers = {{3}, {2}, {0, 1}};
    r.groups = {{"pp", {0, 1}}, {"world", {0, 1}}};
  }
  return ranks;
}

TEST(ProgramSimulatorTest, MatchedSendsAndReceivesAcrossPipelineStagesPass) {
  absl::StatusOr<Simulation> sim = SimulatePrograms(Pipeline());
  ASSERT_TRUE(sim.ok()) << sim.status();
  ASSERT_EQ(sim->ranks.size(), 2u);
  EXPECT_EQ(sim->ranks[0].peak_kept_activations, 4);  // both micro-batches of a and b
  EXPECT_EQ(sim->ranks[1].peak_kept_activations, 2);
  EXPECT_EQ(sim->ranks[0].peak_gathered_units, 0);
  EXPECT_EQ(sim->ranks[0].actions, 15);
  EXPECT_EQ(sim->ranks[1].actions, 17);
  EXPECT_EQ(sim->ranks[1].actions_by_kind.at(K::kRecvAct), 2);
  const CollectivesByGroup& c = sim->ranks[0].collectives;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c.at({"pp", CommOp::kSend}).calls, 2);
  EXPECT_EQ(c.at({"pp", CommOp::kSend}).bytes_sent, 128);
  EXPECT_EQ(c.at({"pp", CommOp::kRecv}).calls, 2);
  EXPECT_EQ(c.at({"pp", CommOp::kRecv}).bytes_sent, 0);
  EXPECT_EQ(c.at({"world", CommOp::kAllReduce}).bytes_sent, 12);
}

// A RECV only posts: its consumer waits for the SEND, and a deadlock names
// both waiting actions and where (if anywhere) the awaited SEND is.
TEST(ProgramSimulatorTest, ConsumersWaitForTheSendAndADeadlockNamesTheTwoActions) {
  std::vector<SimulatedRank> ranks(2);
  ranks[0].program = Hand({Act(K::kForward, 0, 0)});
  ranks[0].units = {0, 1};
  ranks[1].program = Hand({Act(K::kRecvAct, 0, 2, -1, 0), Act(K::kForward, 0, 2)});
  ranks[1].units = {2, 3};
  for (SimulatedRank& r : ranks) r.groups = {{"pp", {0, 1}}};
  EXPECT_EQ(Violation(ranks),
            "deadlock: rank 1 action 1 (FORWARD mb=0 unit=c) waits for SEND_ACT mb=0 unit=b from stage 0 (rank 0; the "
            "RECV_ACT is action 0), which rank 0 never issues; finished: rank 0");

  // Stage 0 starts its backward before sending the activation stage 1
  // needs to produce the gradient: each waits for the other.
  ranks = Pipeline();
  std::vector<Action>& first = ranks[0].program.actions;
  first.insert(first.begin() + 9, first[2]);  // SEND_ACT mb=0 after BACKWARD mb=0 unit=a
  first.erase(first.begin() + 2);
  EXPECT_EQ(Violation(ranks),
            "deadlock: rank 0 action 6 (BACKWARD mb=0 unit=b) waits for SEND_GRAD mb=0 unit=c from stage 1 (rank 1; "
            "the RECV_GRAD is action 5), which rank 1 issues at action 5; rank 1 action 1 (FORWARD mb=0 unit=c) "
            "waits for SEND_ACT mb=0 unit=b from stage 0 (rank 0; the RECV_ACT is action 0), which rank 0 issues at "
            "action 8");
}

TEST(ProgramSimulatorTest, TransfersMatchByMicroBatchNotOrder) {
  std::vector<SimulatedRank> ranks = Pipeline();
  // Rank 0 sends micro-batch 1's activations before micro-batch 0's.
  std::swap(ranks[0].program.actions[2].micro_batch, ranks[0].program.actions[5].micro_batch);
  EXPECT_EQ(Violation(ranks), "ok");
}

TEST(ProgramSimulatorTest, TransferRuleViolations) {
  // A backward whose output gradient comes from stage 1, with no RECV_GRAD.
  std::vector<SimulatedRank> ranks = Pipeline();
  ranks[0].program.actions.erase(ranks[0].program.actions.begin() + 9);  // RECV_GRAD mb=1
  EXPECT_EQ(Violation(ranks),
            "rank 0 action 9 (BACKWARD mb=1 unit=b): BACKWARD of a unit whose output gradient comes from another "
            "stage, with no RECV_GRAD of it posted");
  ranks = Pipeline();
  ranks[1].program.actions.erase(ranks[1].program.actions.begin() + 6);  // RECV_ACT mb=1
  EXPECT_EQ(Violation(ranks),
            "rank 1 action 6 (FORWARD mb=1 unit=c): FORWARD of a unit whose input comes from another stage, with no "
            "RECV_ACT of it posted");
  // A SEND nobody consumes, a RECV nothing consumes.
  ranks = Pipeline();
  ranks[1].program.actions.push_back(ranks[1].program.actions[5]);
  EXPECT_EQ(Violation(ranks), "rank 1 action 17 (SEND_GRAD mb=0 unit=c peer=0 bytes=64): never received by rank 0");
  ranks = Pipeline();
  ranks[0].program.actions.push_back(ranks[0].program.actions[6]);
  EXPECT_EQ(Violation(ranks),
            "rank 0 action 15 (RECV_GRAD mb=0 unit=b peer=1 bytes=64): never consumed (no backward of mb=0 unit=b "
            "follows it)");
  // Posted twice before its consumer.
  ranks = Pipeline();
  ranks[1].program.actions.insert(ranks[1].program.actions.begin(), ranks[1].program.actions[0]);
  EXPECT_EQ(Violation(ranks),
            "rank 1 action 1 (RECV_ACT mb=0 unit=c peer=0 bytes=64): a second RECV_ACT of the same micro-batch and "
            "unit before its consumer ran");
  // A send across another boundary (a's output) does not match c's receive.
  ranks = Pipeline();
  ranks[0].program.actions[2].unit = 0;
  EXPECT_EQ(Violation(ranks),
            "deadlock: rank 0 action 7 (BACKWARD mb=0 unit=b) waits for SEND_GRAD mb=0 unit=c from stage 1 (rank 1; "
            "the RECV_GRAD is action 6), which rank 1 issues at action 5; rank 1 action 1 (FORWARD mb=0 unit=c) waits "
            "for SEND_ACT mb=0 unit=b from stage 0 (rank 0; the RECV_ACT is action 0), which rank 0 never issues");
}

TEST(ProgramSimulatorTest, EveryMicroBatchRunsEveryUnitOnce) {
  auto run = [](std::vector<Action> actions) { return Violation(DataParallel(Hand(std::move(actions), 2), 1, false)); };
  EXPECT_EQ(run({Act(K::kForward, 1, 0)}),
            "rank 0: no FORWARD of mb=0 unit=a (the program forwards the unit for other micro-batches; each runs "
            "once)");
  // A forward without its backward keeps its activations.
  EXPECT_EQ(run({Act(K::kForward, 0, 0), Act(K::kForward, 1, 0), Act(K::kBackward, 1, 0)}),
            "rank 0 action 0 (FORWARD mb=0 unit=a): its activations are never freed (no backward)");
}

TEST(ProgramSimulatorTest, ABackwardAfterTheBucketsLastReduce) {
  auto run = [](std::vector<Action> actions) {
    std::vector<SimulatedRank> ranks = DataParallel(Hand(std::move(actions), 2), 1, false);
    ranks[0].program.bucket_writers = {{3}, {2}, {0}};
    return Violation(ranks);
  };
  EXPECT_EQ(run({Act(K::kForward, 0, 0), Act(K::kForward, 1, 0), Act(K::kBackward, 0, 0), Act(K::kReduce, -1, -1, 2),
                 Act(K::kWaitReduce, -1, -1, 2), Act(K::kBackward, 1, 0)}),
            "rank 0 action 5 (BACKWARD mb=1 unit=a): a backward adding to bucket a..b after its last REDUCE (the "
            "gradient would be lost)");
}

TEST(ProgramSimulatorTest, ComputeOrderViolations) {
  auto run = [](std::vector<Action> actions) { return Violation(DataParallel(Hand(std::move(actions), 2), 1, false)); };
  EXPECT_EQ(run({Act(K::kBackward, 0, 3)}),
            "rank 0 action 0 (BACKWARD mb=0 unit=d): BACKWARD before the unit's FORWARD");
  EXPECT_EQ(run({Act(K::kForward, 0, 0), Act(K::kForward, 0, 0)}),
            "rank 0 action 1 (FORWARD mb=0 unit=a): a second FORWARD of the same micro-batch and unit");
  EXPECT_EQ(run({Act(K::kForward, 0, 1)}),
            "rank 0 action 0 (FORWARD mb=0 unit=b): FORWARD before the FORWARD of mb=0 unit=a below it");
  EXPECT_EQ(run({Act(K::kForward, 1, 0), Act(K::kForward, 1, 1), Act(K::kBackward, 1, 0), Act(K::kBackward, 1, 1)}),
            "rank 0 action 2 (BACKWARD mb=1 unit=a): BACKWARD before the backward of mb=1 unit=b above it");
  EXPECT_EQ(run({Act(K::kForward, 0, 0), Act(K::kBackward, 0, 0), Act(K::kBackward, 0, 0)}),
            "rank 0 action 2 (BACKWARD mb=0 unit=a): a second backward of the same micro-batch and unit");
  EXPECT_EQ(run({Act(K::kRecompute, 0, 0)}),
            "rank 0 action 0 (RECOMPUTE mb=0 unit=a): RECOMPUTE before the unit's FORWARD");
  EXPECT_EQ(run({Act(K::kForward, 0, 0), Act(K::kBackward, 0, 0), Act(K::kRecompute, 0, 0)}),
            "rank 0 action 2 (RECOMPUTE mb=0 unit=a): RECOMPUTE after the unit's backward");
  EXPECT_EQ(run({Act(K::kForward, 0, 0), Act(K::kBackwardWeight, 0, 0)}),
            "rank 0 action 1 (BACKWARD_WEIGHT mb=0 unit=a): BACKWARD_WEIGHT before the unit's BACKWARD_INPUT");
  EXPECT_EQ(run({Act(K::kForward, 0, 0), Act(K::kBackward, 0, 0), Act(K::kBackwardWeight, 0, 0)}),
            "rank 0 action 2 (BACKWARD_WEIGHT mb=0 unit=a): a second BACKWARD_WEIGHT of the same micro-batch and unit");
  EXPECT_EQ(run({Act(K::kForward, 0, 0), Act(K::kForward, 1, 0), Act(K::kBackward, 0, 0)}),
            "rank 0 action 1 (FORWARD mb=1 unit=a): its activations are never freed (no backward)");
  // A pipeline rank computes only its own units.
  std::vector<SimulatedRank> ranks = DataParallel(Hand({Act(K::kForward, 0, 2)}), 1, false);
  ranks[0].units = {0, 1};
  EXPECT_EQ(Violation(ranks), "rank 0 action 0 (FORWARD mb=0 unit=c): this rank does not compute the unit");
}

TEST(ProgramSimulatorTest, SplitBackwardKeepsActivationsUntilTheWeightHalf) {
  absl::StatusOr<Simulation> sim = SimulatePrograms(DataParallel(
      Hand({Act(K::kForward, 0, 0), Act(K::kForward, 0, 1), Act(K::kBackwardInput, 0, 1), Act(K::kBackwardInput, 0, 0),
            Act(K::kForward, 1, 0), Act(K::kBackwardWeight, 0, 1), Act(K::kBackwardWeight, 0, 0),
            Act(K::kForward, 1, 1), Act(K::kBackward, 1, 1), Act(K::kRecompute, 1, 0), Act(K::kBackward, 1, 0)},
           2),
      1, false));
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_EQ(sim->ranks[0].peak_kept_activations, 3);  // (0, a), (0, b) and (1, a)
  EXPECT_EQ(sim->ranks[0].actions_by_kind.at(K::kBackwardInput), 2);
}

TEST(ProgramSimulatorTest, Stage3ComputeNeedsWaitedParameters) {
  StepProgram p = Build(Units(), Options(3));
  ASSERT_EQ(FormatAction(p, p.actions[2]), "WAIT_GATHER unit=a");
  p.actions.erase(p.actions.begin() + 2);
  EXPECT_EQ(Violation(DataParallel(p, 2, true)),
            "rank 0 action 2 (FORWARD mb=0 unit=a): the unit's GATHER is not waited (WAIT_GATHER before it computes)");
  // Without gathers_params nothing is checked about it (the RELEASE waits).
  EXPECT_EQ(Violation(DataParallel(p, 2, false)), "ok");

  p = Build(Units(), Options(3));
  // c's regather for its backward removed.
  ASSERT_EQ(FormatAction(p, p.actions[15]), "GATHER unit=c bytes=300");
  p.actions.erase(p.actions.begin() + 15);
  ASSERT_EQ(FormatAction(p, p.actions[19]), "WAIT_GATHER unit=c");
  p.actions.erase(p.actions.begin() + 19);
  EXPECT_EQ(Violation(DataParallel(p, 2, true)),
            "rank 0 action 19 (BACKWARD mb=0 unit=c): the unit's parameters are not gathered (GATHER and "
            "WAIT_GATHER before it computes)");
}

TEST(ProgramSimulatorTest, GatherStateViolations) {
  auto run = [](std::vector<Action> actions) { return Violation(DataParallel(Hand(std::move(actions)), 1, true)); };
  const IssuedCollective ag{"dp", CommOp::kAllGather, 100, "params a"};
  EXPECT_EQ(run({Act(K::kGather, -1, 0, -1, -1, {ag}), Act(K::kGather, -1, 0, -1, -1, {ag})}),
            "rank 0 action 1 (GATHER unit=a bytes=100): GATHER of a unit already gathered or in flight");
  EXPECT_EQ(run({Act(K::kWaitGather, -1, 0)}),
            "rank 0 action 0 (WAIT_GATHER unit=a): WAIT_GATHER of a unit with no GATHER in flight");
  EXPECT_EQ(run({Act(K::kRelease, -1, 0)}), "rank 0 action 0 (RELEASE unit=a): RELEASE of a unit that is not gathered");
  // RELEASE of an in-flight unit waits for its gather, like UnitShard's.
  EXPECT_EQ(run({Act(K::kGather, -1, 0, -1, -1, {ag}), Act(K::kRelease, -1, 0)}), "ok");
  EXPECT_EQ(run({Act(K::kGather, -1, 0, -1, -1, {ag}), Act(K::kWaitGather, -1, 0)}),
            "rank 0 action 0 (GATHER unit=a bytes=100): the unit is still gathered at the end of the program "
            "(RELEASE)");
}

TEST(ProgramSimulatorTest, ReductionViolations) {
  StepProgram p = Build(Units(), Options(2));
  // Move REDUCE bucket=a..b before the BACKWARD of a.
  ASSERT_EQ(FormatAction(p, p.actions[10]), "BACKWARD mb=0 unit=a");
  std::swap(p.actions[10], p.actions[11]);
  // Rank 0 waits at WAIT_REDUCE bucket=d for rank 1, which gets here first.
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 1 action 10 (REDUCE bucket=a..b bytes=30): REDUCE before a backward of unit a, which adds to the "
            "bucket's gradients");
  // A borrower's backward counts: c's bucket must wait for b's.
  std::vector<ProgramUnit> units = Units();
  units[1].needs = {1, 2};
  p = Build(units, Options(2));
  ASSERT_EQ(FormatAction(p, p.actions[7]), "BACKWARD mb=0 unit=b");
  std::swap(p.actions[7], p.actions[8]);
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 0 action 7 (REDUCE bucket=c bytes=30): REDUCE before a backward of unit b, which adds to the "
            "bucket's gradients");
  // With ACCUMULATE each micro-batch's REDUCE needs that micro-batch's backward.
  DataParallelProgramOptions o = Options(2);
  o.micro_batches = 2;
  p = Build(Units(), o);
  ASSERT_EQ(FormatAction(p, p.actions[18]), "BACKWARD mb=1 unit=d");
  std::swap(p.actions[18], p.actions[19]);
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 0 action 18 (REDUCE bucket=d bytes=40): REDUCE before a backward of unit d, which adds to the "
            "bucket's gradients");

  p = Build(Units(), Options(2));
  ASSERT_EQ(FormatAction(p, p.actions[13]), "WAIT_REDUCE bucket=a..b");
  p.actions.erase(p.actions.begin() + 13);
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 1 action 13 (REDUCE_NORM bytes=12): REDUCE_NORM before the WAIT_REDUCE of bucket a..b");
  p.actions.pop_back();
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 0 action 11 (REDUCE bucket=a..b bytes=30): the REDUCE is never waited (WAIT_REDUCE)");
  EXPECT_EQ(Violation(DataParallel(Hand({Act(K::kForward, 0, 0), Act(K::kBackward, 0, 0), Act(K::kReduce, -1, -1, 2),
                                         Act(K::kReduce, -1, -1, 2)}),
                                   1, false)),
            "rank 0 action 3 (REDUCE bucket=a..b): REDUCE of a bucket still in flight (WAIT_REDUCE first)");
}

// The owner's updated parameters go to the mirror only once the step's
// norm decided the update: TIED_PUBLISH before REDUCE_NORM is refused, and
// a TIED_PUBLISH without a unit is malformed.
TEST(ProgramSimulatorTest, TiedPublishFollowsTheNormReduction) {
  EXPECT_EQ(Violation(DataParallel(Hand({Act(K::kForward, 0, 0), Act(K::kBackward, 0, 0), Act(K::kTiedPublish, -1, 0),
                                         Act(K::kReduceNorm)}),
                                   1, false)),
            "rank 0 action 2 (TIED_PUBLISH unit=a): TIED_PUBLISH before REDUCE_NORM");
  EXPECT_EQ(Failure(DataParallel(Hand({Act(K::kForward, 0, 0), Act(K::kBackward, 0, 0), Act(K::kReduceNorm),
                                       Act(K::kTiedPublish, -1, 0)}),
                                 1, false),
                    absl::StatusCode::kOk),
            "ok");
  EXPECT_EQ(Failure(DataParallel(Hand({Act(K::kReduceNorm), Act(K::kTiedPublish)}), 1, false),
                    absl::StatusCode::kInvalidArgument),
            "rank 0 action 1 (TIED_PUBLISH): unit -1, expected in [0, 4)");
}

TEST(ProgramSimulatorTest, MalformedInputs) {
  auto invalid = [](const std::vector<SimulatedRank>& ranks) {
    return Failure(ranks, absl::StatusCode::kInvalidArgument);
  };
  std::vector<SimulatedRank> ranks = DataParallel(Hand({Act(K::kForward, 0, 4)}), 2, false);
  EXPECT_EQ(invalid(ranks), "rank 0 action 0 (FORWARD mb=0 unit=4): unit 4, expected in [0, 4)");
  ranks = DataParallel(Hand({Act(K::kForward, 1, 0)}), 2, false);
  EXPECT_EQ(invalid(ranks), "rank 0 action 0 (FORWARD mb=1 unit=a): micro-batch 1, expected in [0, 1)");
  ranks = DataParallel(Hand({Act(K::kWaitReduce, -1, -1, 3)}), 2, false);
  EXPECT_EQ(invalid(ranks), "rank 0 action 0 (WAIT_REDUCE bucket=3): bucket 3, expected in [0, 3)");
  ranks = DataParallel(Hand({Act(K::kReduceNorm, -1, -1, -1, -1, {{"tp", CommOp::kAllReduce, 4, "x"}})}), 2, false);
  EXPECT_EQ(invalid(ranks),
            "rank 0 action 0 (REDUCE_NORM bytes=4): issues on group 'tp', which rank 0 is not in (its groups: dp)");
  ranks = DataParallel(Hand({Act(K::kSendAct, 0, 1, -1, 1)}), 2, false);
  EXPECT_EQ(invalid(ranks), "rank 0 action 0 (SEND_ACT mb=0 unit=b peer=1): a transfer on a rank without a pp group");
  ranks = Pipeline();
  ranks[1].program.actions[0].peer_stage = 1;
  EXPECT_EQ(invalid(ranks),
            "rank 1 action 0 (RECV_ACT mb=0 unit=c peer=1 bytes=64): peer stage 1, expected in [0, 2) other than "
            "this rank's stage 1");
  ranks = Pipeline();
  ranks[1].program.actions[0].unit = 0;
  EXPECT_EQ(invalid(ranks),
            "rank 1 action 0 (RECV_ACT mb=0 unit=a peer=0 bytes=64): unit 0: the transfer crosses no boundary "
            "between units (the RECV_ACT of a unit in [1, 4) expected)");
  ranks = Pipeline();
  ranks[0].program.actions[2].unit = 3;
  EXPECT_EQ(invalid(ranks),
            "rank 0 action 2 (SEND_ACT mb=0 unit=d peer=1 bytes=64): unit 3: the transfer crosses no boundary "
            "between units (the SEND_ACT of a unit in [0, 3) expected)");
  ranks = Pipeline();
  ranks[0].program.actions[2].unit = -1;
  EXPECT_EQ(invalid(ranks),
            "rank 0 action 2 (SEND_ACT mb=0 peer=1 bytes=64): unit -1: the transfer crosses no boundary between "
            "units (the SEND_ACT of a unit in [0, 3) expected)");
  ranks = DataParallel(Hand({}), 2, false);
  ranks[1].groups["dp"] = {1};
  EXPECT_EQ(invalid(ranks), "rank 0 lists group dp as ranks 0, 1 but rank 1 lists it as ranks 1");
  ranks[1].groups.clear();
  EXPECT_EQ(invalid(ranks), "rank 0 lists group dp as ranks 0, 1 but rank 1 has no such group");
  ranks = DataParallel(Hand({}), 2, false);
  ranks[0].groups["dp"] = {1, 2};
  EXPECT_EQ(invalid(ranks), "rank 0 lists group dp as ranks 1, 2, expected distinct ranks in [0, 2) including 0");
  ranks = DataParallel(Hand({}), 1, false);
  ranks[0].units = {5};
  EXPECT_EQ(invalid(ranks), "rank 0 computes unit 5, expected in [0, 4)");
}

TEST(ProgramSimulatorTest, NoRanks) {
  absl::StatusOr<Simulation> sim = SimulatePrograms({});
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_TRUE(sim->ranks.empty());
}

// The NVMe tier's streaming (docs/offload_streaming.md): Units() with 2500
// elements of optimizer region each, chunks of 1024 (3 per unit, 12 in
// all) cycling through 2 slots. `grads`: the gradient shards stream too;
// `tied_a`: unit a is tied across a pipeline's ends (TIED_REDUCE over
// "embed").
StepProgram Streamed(int stage, int slots = 2, bool grads = false, bool tied_a = false) {
  StepProgram p = Build(Units(), Options(stage));
  p.actions.pop_back();  // Build's REDUCE_NORM: the optimizer phase adds its own
  OptimizerPhaseInput in;
  for (const char* name : {"a", "b", "c", "d"}) {
    in.units.push_back({name, 1250, tied_a && name[0] == 'a', stage == 0 ? 2500 : 1250});
  }
  in.buckets = {{3}, {2}, {0, 1}};
  in.zero = *ZeroPolicy::ForStage(stage);
  in.stream.slots = slots;
  in.stream.chunk_elements = 1024;
  in.stream.grads = grads;
  AddStepPrologueAndOptimizerPhase(in, &p);
  return p;
}

int Find(const StepProgram& p, const std::string& line) {
  for (int i = 0; i < static_cast<int>(p.actions.size()); ++i) {
    if (FormatAction(p, p.actions[i]) == line) return i;
  }
  ADD_FAILURE() << "no action '" << line << "'";
  return 0;
}

TEST(ProgramSimulatorTest, StreamedProgramsPass) {
  for (int stage = 0; stage <= 3; ++stage) {
    const StepProgram p = Streamed(stage);
    ASSERT_EQ(p.chunks.size(), stage == 0 ? 12u : 8u) << stage;
    absl::StatusOr<Simulation> sim = SimulatePrograms(DataParallel(p, 2, stage == 3));
    EXPECT_TRUE(sim.ok()) << "stage " << stage << ": " << sim.status() << "\n" << FormatProgram(p);
  }
}

// The first loads run under forward and backward: the LOAD of slot i right
// after the i-th compute action, spread evenly when there are more slots
// than compute actions, with no WAIT_STORE anywhere (a LOAD is queued
// behind its slot's store).
TEST(ProgramSimulatorTest, StreamedFirstLoadsFollowTheComputeActions) {
  auto compute_before = [](const StepProgram& p, int action) {
    int n = 0;
    for (int i = 0; i < action; ++i) {
      const ActionKind k = p.actions[i].kind;
      n += k == ActionKind::kForward || k == ActionKind::kBackward || k == ActionKind::kRecompute;
    }
    return n;
  };
  const StepProgram two = Streamed(1);
  const int load0 = Find(two, "LOAD unit=a chunk=0 slot=0");
  const int load1 = Find(two, "LOAD unit=a chunk=1 slot=1");
  EXPECT_EQ(FormatAction(two, two.actions[load0 - 1]), "FORWARD mb=0 unit=a");
  EXPECT_EQ(compute_before(two, load0), 1);
  EXPECT_EQ(compute_before(two, load1), 2);
  EXPECT_EQ(compute_before(two, load1 - 1), 1);
  for (const Action& a : two.actions) EXPECT_NE(a.kind, ActionKind::kWaitStore) << FormatAction(two, a);
  // 8 compute actions (4 units forward and backward), 12 slots for the 12
  // chunks of stage 0: chunk c after compute action floor(c * 8 / 12).
  const StepProgram wide = Streamed(0, 12);
  ASSERT_EQ(wide.chunks.size(), 12u);
  for (int c = 0; c < 12; ++c) {
    const int load = Find(wide, "LOAD unit=" + std::string(1, "aaabbbcccddd"[c]) + " chunk=" + std::to_string(c) +
                                    " slot=" + std::to_string(c));
    EXPECT_EQ(compute_before(wide, load), c * 8 / 12 + 1) << c;
  }
  for (int stage = 0; stage <= 3; ++stage) {
    const StepProgram p = Streamed(stage, 12);
    absl::StatusOr<Simulation> sim = SimulatePrograms(DataParallel(p, 2, stage == 3));
    EXPECT_TRUE(sim.ok()) << "stage " << stage << ": " << sim.status() << "\n" << FormatProgram(p);
  }
}

TEST(ProgramSimulatorTest, StreamingViolations) {
  // A LOAD queued behind the slot's store in flight (the previous step's
  // chunk 6) passes; an UPDATE before the WAIT_LOAD that completes that
  // store would write the slot the store still reads.
  StepProgram p = Streamed(1);
  const int queued_wait = Find(p, "WAIT_LOAD unit=b chunk=2 slot=0");
  p.actions.erase(p.actions.begin() + queued_wait);
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 0 action " + std::to_string(queued_wait) +
                " (UPDATE bucket=a..b chunk=2 slot=0): UPDATE into slot 0 while the STORE of chunk 0 from it may "
                "still be in flight (WAIT_LOAD chunk 2 first)");

  p = Streamed(1);
  const int wait_load = Find(p, "WAIT_LOAD unit=a chunk=1 slot=1");
  p.actions.erase(p.actions.begin() + wait_load);
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 0 action " + std::to_string(wait_load) +
                " (UPDATE bucket=a..b chunk=1 slot=1): UPDATE of a chunk that is not loaded (WAIT_LOAD first)");

  p = Streamed(1);
  const int update = Find(p, "UPDATE bucket=c chunk=4 slot=0");
  ASSERT_EQ(FormatAction(p, p.actions[update + 1]), "STORE unit=c chunk=4 slot=0");
  std::swap(p.actions[update], p.actions[update + 1]);
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 0 action " + std::to_string(update) +
                " (STORE unit=c chunk=4 slot=0): STORE of a chunk before its UPDATE");

  // A slot is reused only once its chunk is stored: the LOAD of chunk 6
  // moved before the STORE of chunk 4 is refused.
  p = Streamed(1);
  const int store4 = Find(p, "STORE unit=c chunk=4 slot=0");
  const int load6 = Find(p, "LOAD unit=d chunk=6 slot=0");
  ASSERT_GT(load6, store4);
  Action moved = p.actions[load6];
  p.actions.erase(p.actions.begin() + load6);
  p.actions.insert(p.actions.begin() + store4, moved);
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 0 action " + std::to_string(store4) +
                " (LOAD unit=d chunk=6 slot=0): LOAD into slot 0, which still holds chunk 4 (not stored yet)");

  p = Streamed(1);
  const int load = Find(p, "LOAD unit=d chunk=6 slot=0");
  p.actions.erase(p.actions.begin() + load);
  EXPECT_EQ(Violation(DataParallel(p, 2, false)),
            "rank 0 action " + std::to_string(Find(p, "WAIT_LOAD unit=d chunk=6 slot=0")) +
                " (WAIT_LOAD unit=d chunk=6 slot=0): WAIT_LOAD of a chunk with no LOAD in flight");

  // A chunk the program never streams.
  StepProgram hand = Hand({});
  hand.chunks = {{0, 2, 0, 1024, 0}, {0, 2, 1024, 10, 1}};
  hand.offload_slots = 2;
  auto io = [](ActionKind kind, int chunk) {
    Action a = Act(kind, -1, 0, kind == K::kUpdate ? 2 : -1);
    if (kind == K::kUpdate) a.unit = -1;
    a.chunk = chunk;
    a.slot = chunk;
    return a;
  };
  hand.actions = {io(K::kWaitStore, 0), io(K::kLoad, 0), io(K::kWaitLoad, 0), io(K::kUpdate, 0), io(K::kStore, 0)};
  EXPECT_EQ(Violation(DataParallel(hand, 1, false)),
            "rank 0: chunk 1 (unit a elements [1024, 1034)) is LOADed 0 times in a step, expected once");
  hand.actions.push_back(io(K::kUpdate, 0));
  EXPECT_EQ(Violation(DataParallel(hand, 1, false)),
            "rank 0 action 5 (UPDATE bucket=a..b chunk=0 slot=0): UPDATE of a chunk that is not loaded (WAIT_LOAD "
            "first)");
  hand.actions.back() = io(K::kLoad, 1);
  hand.actions.back().slot = 0;
  EXPECT_EQ(Failure(DataParallel(hand, 1, false), absl::StatusCode::kInvalidArgument),
            "rank 0 action 5 (LOAD unit=a chunk=1 slot=0): slot 0, expected the chunk's slot 1 in [0, 2)");
}

}  // namespace
}  // namespace zeroshard

namespace zeroshard {
namespace {

// Gradient shards on NVMe: a chunk reads its stored gradient piece in the
// optimizer phase only (every reduction stored, under hybrid sharding after
// its replica all-reduce), and a tied unit's only after its TIED_REDUCE
// stored the summed shard again.
TEST(ProgramSimulatorTest, StreamedGradientPiecesAreReadAfterTheReductionsAndTheTie) {
  auto ranks = [](const StepProgram& program) {
    std::vector<SimulatedRank> r = DataParallel(program, 2, false);
    r[0].groups["embed"] = {0};
    r[1].groups["embed"] = {1};
    return r;
  };
  auto index_of = [](const StepProgram& p, ActionKind kind) {
    for (int i = 0; i < static_cast<int>(p.actions.size()); ++i) {
      if (p.actions[i].kind == kind) return i;
    }
    ADD_FAILURE() << "no " << ActionKindName(kind);
    return 0;
  };
  const StepProgram built = Streamed(2, 2, /*grads=*/true, /*tied_a=*/true);
  ASSERT_TRUE(built.streams_grads);
  ASSERT_FALSE(Streamed(2).streams_grads);
  EXPECT_EQ(Violation(ranks(built)), "ok") << FormatProgram(built);

  // The tie moved after the WAIT_LOAD of a's first chunk: that read would
  // miss the other end's gradient.
  StepProgram p = built;
  const int tie = index_of(p, ActionKind::kTiedReduce);
  const Action moved = p.actions[tie];
  p.actions.erase(p.actions.begin() + tie);
  const int wait0 = Find(p, "WAIT_LOAD unit=a chunk=0 slot=0");
  ASSERT_GT(wait0, tie);
  p.actions.insert(p.actions.begin() + wait0 + 1, moved);
  EXPECT_EQ(Violation(ranks(p)), "rank 0 action " + std::to_string(wait0) +
                                     " (WAIT_LOAD unit=a chunk=0 slot=0): WAIT_LOAD reads the chunk's gradient "
                                     "piece before the TIED_REDUCE of unit a (the summed shard is not stored yet)");

  // A WAIT_LOAD moved into the backward, right after its LOAD: legal for
  // the other classes, refused when it would read the gradient piece.
  for (bool grads : {false, true}) {
    p = Streamed(2, 2, grads, /*tied_a=*/true);
    const int load = Find(p, "LOAD unit=a chunk=1 slot=1");
    const int wait = Find(p, "WAIT_LOAD unit=a chunk=1 slot=1");
    ASSERT_LT(load, index_of(p, ActionKind::kTiedReduce));
    const Action w = p.actions[wait];
    p.actions.erase(p.actions.begin() + wait);
    p.actions.insert(p.actions.begin() + load + 1, w);
    EXPECT_EQ(Violation(ranks(p)),
              grads ? "rank 0 action " + std::to_string(load + 1) +
                          " (WAIT_LOAD unit=a chunk=1 slot=1): WAIT_LOAD reads the chunk's gradient piece before the "
                          "optimizer phase (its reduction may not be stored yet)"
                    : "ok")
        << grads;
  }
}

}  // namespace
}  // namespace zeroshard

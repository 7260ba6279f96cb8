// The parameter shards' LOAD / STORE placement (engine.offload.params:
// NVME; engine/param_offload_program.h) and the simulator's rules for it.
#include "engine/param_offload_program.h"

#include <string>
#include <utility>
#include <vector>

#include "engine/data_parallel_program.h"
#include "engine/optimizer_program.h"
#include "engine/program_simulator.h"
#include "engine/step_program.h"
#include "gtest/gtest.h"
#include "sharding/zero_policy.h"

namespace zeroshard {
namespace {

// Four units a..d in three buckets (d, c, a..b), 1250 elements of shard
// each; with `chunks` the master and optimizer state stream in chunks of
// 1024 through 2 slots.
StepProgram Stage3(int prefetch, bool reshard, bool chunks, bool training = true) {
  std::vector<ProgramUnit> units(4);
  const char* names[] = {"a", "b", "c", "d"};
  for (int u = 0; u < 4; ++u) {
    units[u].name = names[u];
    units[u].needs = {u};
    units[u].gather_bytes = 2500;
  }
  DataParallelProgramOptions o;
  o.zero = *ZeroPolicy::ForStage(3);
  o.prefetch = prefetch;
  o.reshard_after_forward = reshard;
  o.training = training;
  const std::vector<ProgramBucket> buckets = {{{3}, 40, "d"}, {{2}, 30, "c"}, {{0, 1}, 30, "a..b"}};
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, buckets, o);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return StepProgram();
  ParamShardIoInput io;
  io.streams = {true, true, true, true};
  io.min_slots = prefetch + 1;
  if (training) {
    OptimizerPhaseInput in;
    for (const char* name : names) in.units.push_back({name, 1250, false, 1250});
    in.buckets = {{3}, {2}, {0, 1}};
    in.zero = o.zero;
    in.compute_dtype_bytes = 2;
    if (chunks) {
      in.stream.slots = 2;
      in.stream.chunk_elements = 1024;
    }
    AddStepPrologueAndOptimizerPhase(in, &*p);
    io.buckets = in.buckets;
  }
  AddParamShardIo(io, &*p);
  return *p;
}

std::vector<SimulatedRank> TwoRanks(const StepProgram& program) {
  std::vector<SimulatedRank> ranks(2);
  for (SimulatedRank& r : ranks) {
    r.program = program;
    r.groups = {{"dp", {0, 1}}};
    r.gathers_params = true;
  }
  return ranks;
}

int Find(const StepProgram& p, const std::string& line, int from = 0) {
  for (int i = from; i < static_cast<int>(p.actions.size()); ++i) {
    if (FormatAction(p, p.actions[i]) == line) return i;
  }
  ADD_FAILURE() << "no action '" << line << "' from " << from << " in\n" << FormatProgram(p);
  return 0;
}

std::string Line(const StepProgram& p, int i) { return FormatAction(p, p.actions[i]); }

std::string Violation(const StepProgram& p) {
  absl::StatusOr<Simulation> sim = SimulatePrograms(TwoRanks(p));
  if (sim.ok()) return "ok";
  EXPECT_EQ(sim.status().code(), absl::StatusCode::kFailedPrecondition) << sim.status();
  return std::string(sim.status().message());
}

std::string At(const StepProgram& p, int i) {
  return "rank 0 action " + std::to_string(i) + " (" + Line(p, i) + "): ";
}

TEST(ParamOffloadProgramTest, EveryGatherWaitsItsShardAndEveryProgramSimulates) {
  for (int prefetch : {0, 1, 2}) {
    for (bool reshard : {true, false}) {
      for (bool chunks : {false, true}) {
        for (bool training : {true, false}) {
          const StepProgram p = Stage3(prefetch, reshard, chunks, training);
          SCOPED_TRACE(testing::Message() << "prefetch " << prefetch << " reshard " << reshard << " chunks " << chunks
                                          << " training " << training << "\n"
                                          << FormatProgram(p));
          EXPECT_EQ(Violation(p), "ok");
          EXPECT_GE(p.param_slots, prefetch + 1);
          int gathers = 0, stores = 0;
          for (int i = 0; i < static_cast<int>(p.actions.size()); ++i) {
            const Action& a = p.actions[i];
            if (a.kind == ActionKind::kGather) {
              ++gathers;
              ASSERT_GT(i, 0);
              const Action& wait = p.actions[i - 1];
              EXPECT_EQ(wait.kind, ActionKind::kWaitLoad) << Line(p, i);
              EXPECT_EQ(wait.unit, a.unit) << Line(p, i);
            }
            if (a.kind == ActionKind::kStore && a.param_slot >= 0) ++stores;
          }
          EXPECT_GT(gathers, 0);
          EXPECT_EQ(stores, training ? 4 : 0);
        }
      }
    }
  }
}

TEST(ParamOffloadProgramTest, WithoutStreamedUnitsTheProgramIsUnchanged) {
  std::vector<ProgramUnit> units(2);
  units[0] = {"a", {0}, 2500};
  units[1] = {"b", {1}, 2500};
  DataParallelProgramOptions o;
  o.zero = *ZeroPolicy::ForStage(3);
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, {{{0, 1}, 30, "a..b"}}, o);
  ASSERT_TRUE(p.ok()) << p.status();
  StepProgram q = *p;
  AddParamShardIo({{false, false}, {{0, 1}}, 2}, &q);
  EXPECT_EQ(FormatProgram(q), FormatProgram(*p));
  EXPECT_EQ(q.param_slots, 0);
}

// Prefetch 1 over two param slots: each LOAD right after the WAIT_GATHER
// that frees its slot (the gather's input consumed), the first two right
// after BEGIN_STEP behind the previous step's last stores, each updated
// unit stored right after its PUBLISH.
TEST(ParamOffloadProgramTest, LoadsGoRightAfterTheSlotsPreviousUse) {
  const StepProgram p = Stage3(1, true, false);
  EXPECT_EQ(p.param_slots, 2);
  ASSERT_GT(p.actions.size(), 6u);
  EXPECT_EQ(Line(p, 1), "WAIT_STORE unit=c param_slot=0");
  EXPECT_EQ(Line(p, 2), "LOAD unit=a param_slot=0");
  EXPECT_EQ(Line(p, 3), "WAIT_STORE unit=d param_slot=1");
  EXPECT_EQ(Line(p, 4), "LOAD unit=b param_slot=1");
  EXPECT_EQ(Line(p, 5), "WAIT_LOAD unit=a param_slot=0");
  EXPECT_EQ(Line(p, 6), "GATHER unit=a bytes=2500");
  EXPECT_EQ(Line(p, Find(p, "WAIT_GATHER unit=a") + 1), "LOAD unit=c param_slot=0");
  const int publish = Find(p, "PUBLISH bucket=c");
  EXPECT_EQ(Line(p, publish + 1), "STORE unit=c param_slot=0");
  const int update = Find(p, "UPDATE bucket=c");
  EXPECT_EQ(Line(p, update - 1), "WAIT_LOAD unit=c param_slot=0");
  // Streamed chunks: the unit's shard is stored after its last chunk.
  const StepProgram q = Stage3(1, true, true);
  EXPECT_EQ(Line(q, Find(q, "UPDATE bucket=c chunk=5 slot=1") + 1), "STORE unit=c param_slot=1");
  EXPECT_EQ(Line(q, Find(q, "UPDATE bucket=c chunk=4 slot=0") - 1), "WAIT_LOAD unit=c param_slot=1");
}

TEST(ParamOffloadProgramTest, SimulatorRejectsAReloadBeforeTheSlotsUseIsFinished) {
  StepProgram p = Stage3(1, true, false);
  // The load into slot 0 moved before the gather reading slot 0 is waited.
  const int wait = Find(p, "WAIT_GATHER unit=a");
  std::swap(p.actions[wait], p.actions[wait + 1]);
  EXPECT_EQ(Violation(p), At(p, wait) + "LOAD into param slot 0 while the GATHER of unit a reading it is not waited "
                                        "(WAIT_GATHER first)");
  p = Stage3(1, true, false);
  const int wait_store = Find(p, "WAIT_STORE unit=a param_slot=1");
  p.actions.erase(p.actions.begin() + wait_store);
  EXPECT_EQ(Violation(p),
            At(p, wait_store) + "LOAD into param slot 1 while the STORE of unit a from it is not waited (WAIT_STORE first)");
  p = Stage3(1, true, false);
  const int load = Find(p, "LOAD unit=a param_slot=0");
  p.actions.erase(p.actions.begin() + load);
  const int wait_load = Find(p, "WAIT_LOAD unit=a param_slot=0");
  EXPECT_EQ(Violation(p), At(p, wait_load) + "WAIT_LOAD of unit a with no LOAD of it in flight into param slot 0");
}

TEST(ParamOffloadProgramTest, SimulatorRejectsAGatherBeforeItsWaitLoad) {
  StepProgram p = Stage3(1, true, false);
  const int wait = Find(p, "WAIT_LOAD unit=a param_slot=0");
  p.actions.erase(p.actions.begin() + wait);
  EXPECT_EQ(Violation(p), At(p, wait) + "GATHER of unit a, whose shard is not in a param slot (WAIT_LOAD first)");
}

TEST(ParamOffloadProgramTest, SimulatorRejectsALoadThatWouldMissTheStoredShard) {
  // A third slot: unit c loaded again between its update and its STORE.
  StepProgram p = Stage3(1, true, false);
  p.param_slots = 3;
  const int store = Find(p, "STORE unit=c param_slot=0");
  Action load;
  load.kind = ActionKind::kLoad;
  load.unit = 2;
  load.param_slot = 2;
  p.actions.insert(p.actions.begin() + store, load);
  EXPECT_EQ(Violation(p), At(p, store) + "LOAD of unit c reads its shard before the update is stored (STORE at action " +
                              std::to_string(store + 1) + ")");
  // A STORE from a slot that does not hold the unit.
  p = Stage3(1, true, false);
  const int wrong = Find(p, "STORE unit=c param_slot=0");
  p.actions[wrong].param_slot = 1;
  EXPECT_EQ(Violation(p), At(p, wrong) + "STORE of unit c from param slot 1, which does not hold it loaded (WAIT_LOAD "
                                         "first)");
}

}  // namespace
}  // namespace zeroshard

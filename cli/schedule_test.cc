#include "cli/schedule.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "cli/layout_suggest.h"
#include "engine/cost_profile.h"
#include "engine/data_parallel_program.h"
#include "engine/program_simulator.h"
#include "engine/step_program.h"
#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

// Stage 3, one micro-batch, prefetch 1: units a (100 gather bytes) and b
// (60), one bucket of both (80 reduce bytes) closing at a's backward, and a
// 20-byte norm all-reduce. By hand:
//   GATHER a, GATHER b, WAIT_GATHER a, FORWARD a, RELEASE a,
//   WAIT_GATHER b, FORWARD b,
//   GATHER a, BACKWARD b, RELEASE b,
//   WAIT_GATHER a, BACKWARD a, RELEASE a, REDUCE a..b, WAIT_REDUCE a..b,
//   REDUCE_NORM
// so 3 gathers of 100 + 60 + 100 bytes per rank (b stays gathered from its
// forward to its backward), both units gathered at once at the start
// (peak 2) and both forwards kept until the backwards.
StepProgram TwoUnitProgram() {
  std::vector<ProgramUnit> units(2);
  units[0].name = "a";
  units[0].needs = {0};
  units[0].gather_bytes = 100;
  units[1].name = "b";
  units[1].needs = {1};
  units[1].gather_bytes = 60;
  std::vector<ProgramBucket> buckets = {{{0, 1}, 80, "a..b"}};
  DataParallelProgramOptions options;
  options.zero = *ZeroPolicy::ForStage(3);
  options.micro_batches = 1;
  options.prefetch = 1;
  absl::StatusOr<StepProgram> program = BuildDataParallelProgram(units, buckets, options);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return StepProgram();
  Action norm;
  norm.kind = ActionKind::kReduceNorm;
  norm.issues = {{"dp", CommOp::kAllReduce, 20, "norm, loss, overflow"}};
  program->actions.push_back(norm);
  return *program;
}

Simulation Simulate(const StepProgram& program, int dp) {
  std::vector<int> members;
  for (int r = 0; r < dp; ++r) members.push_back(r);
  std::vector<SimulatedRank> ranks(dp);
  for (SimulatedRank& r : ranks) {
    r.program = program;
    r.groups = {{"dp", members}};
    r.gathers_params = true;
  }
  absl::StatusOr<Simulation> sim = SimulatePrograms(ranks);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return sim.ok() ? *sim : Simulation();
}

TEST(FormatScheduleSummaryTest, CountsCollectivesAndPrintsPredictions) {
  const StepProgram program = TwoUnitProgram();
  ASSERT_EQ(program.actions.size(), 16u) << FormatProgram(program);
  // Two ranks: an AllGather sends (n-1) x its input, a ReduceScatter (n-1)
  // x its output, an AllReduce 2(n-1)/n x its buffer.
  EXPECT_EQ(FormatScheduleSummary(program, 2, 1, Simulate(program, 2)),
            "actions by kind:\n"
            "  FORWARD                     2\n"
            "  BACKWARD                    2\n"
            "  GATHER                      3\n"
            "  WAIT_GATHER                 3\n"
            "  RELEASE                     3\n"
            "  REDUCE                      1\n"
            "  WAIT_REDUCE                 1\n"
            "  REDUCE_NORM                 1\n"
            "  total                      16\n"
            "collectives per step (calls, bytes this rank sends):\n"
            "  dp AllGather                3 calls          260 bytes\n"
            "  dp ReduceScatter            1 call            80 bytes\n"
            "  dp AllReduce                1 call            20 bytes\n"
            "  control AllGather           1 call  (BEGIN_STEP's batch-signature agreement; control traffic, "
            "not counted)\n"
            "prediction for rank 1 (every dp rank's program simulated, 2 ranks):\n"
            "  peak gathered units         2\n"
            "  peak kept activations       2\n"
            "  verdict: OK\n");
}

TEST(FormatScheduleSummaryTest, FailedSimulationPrintsItsErrorAndNoPredictions) {
  const StepProgram program = TwoUnitProgram();
  const absl::StatusOr<Simulation> failed =
      absl::FailedPreconditionError("deadlock: rank 0 waits at WAIT_GATHER unit=a");
  EXPECT_EQ(FormatScheduleSummary(program, 4, 0, failed),
            "actions by kind:\n"
            "  FORWARD                     2\n"
            "  BACKWARD                    2\n"
            "  GATHER                      3\n"
            "  WAIT_GATHER                 3\n"
            "  RELEASE                     3\n"
            "  REDUCE                      1\n"
            "  WAIT_REDUCE                 1\n"
            "  REDUCE_NORM                 1\n"
            "  total                      16\n"
            "collectives per step (calls, bytes this rank sends):\n"
            "  dp AllGather                3 calls          780 bytes\n"
            "  dp ReduceScatter            1 call           240 bytes\n"
            "  dp AllReduce                1 call            30 bytes\n"
            "  control AllGather           1 call  (BEGIN_STEP's batch-signature agreement; control traffic, "
            "not counted)\n"
            "prediction for rank 0 (every dp rank's program simulated, 4 ranks):\n"
            "  verdict: FAILED_PRECONDITION: deadlock: rank 0 waits at WAIT_GATHER unit=a\n");
}

TEST(FormatScheduleSummaryTest, OneRankMovesNothing) {
  const StepProgram program = TwoUnitProgram();
  const std::string summary = FormatScheduleSummary(program, 1, 0, Simulate(program, 1));
  EXPECT_NE(summary.find("  dp AllGather                3 calls            0 bytes\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("  dp AllReduce                1 call             0 bytes\n"), std::string::npos) << summary;
}

// GPT-2 n_layer 4 n_embd 32 (units embed, h.0..h.3, head; the head borrows
// wte), ZeRO-3, 16 sequences a step.
std::string WriteConfig(const std::string& name, const std::string& engine) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << "model { n_layer: 4 n_head: 2 n_embd: 32 vocab_size: 256 seq_len: 16 }\n"
                         "data { train_path: \"train.bin\" batch_size: 16 }\n"
                         "engine { zero { stage: 3 } "
                      << engine << " }\n";
  return path;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// A cost profile of the config's units: each F 1 ms, fused backward 2 ms,
// at a micro-batch of 16 x 16 tokens; updates free; a dp link of 10 us and
// 1 GB/s.
CostProfile Profile() {
  CostProfile p;
  p.set_source("profile.pbtxt");
  p.set_tp(1);
  p.set_micro_batch_elements(256);
  for (const char* name : {"embed", "h.0", "h.1", "h.2", "h.3", "head"}) {
    UnitCost* u = p.add_units();
    u->set_name(name);
    u->set_forward_seconds(1e-3);
    u->set_backward_input_seconds(2e-3);
    u->set_recompute_seconds(1e-3);
  }
  LinkCost* dp = p.add_links();
  dp->set_group("dp");
  dp->set_latency_seconds(1e-5);
  dp->set_bytes_per_second(1e9);
  return p;
}

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result Schedule(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = RunSchedule(args, out, err);
  return {code, out.str(), err.str()};
}

// Everything after the header line.
std::string Body(const std::string& out) { return out.substr(out.find('\n') + 1); }

TEST(ScheduleCommandTest, SimulatesFourStagesOf1F1B) {
  const std::string path = WriteConfig("pp4.pbtxt", "parallel { pp: 4 } gradient_accumulation_steps: 8");
  const Result r = Schedule({path, "--simulate"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Body(r.out),
            "chunks (partitioned by cost): 0 = embed..h.0 (stage 0), 1 = h.1 (stage 1), 2 = h.2 (stage 2), 3 = "
            "h.3..head (stage 3)\n"
            "ONE_F_ONE_B timeline, per unit F 1 B 1 W 1, one character = 0.5:\n"
            "stage 0 "
            "|F0ffF1ffF2ffF3ff............B0bbbbbbF4ffB1bbbbbbF5ffB2bbbbbbF6ffB3bbbbbbF7ffB4bbbbbb....B5bbbbbb...."
            "B6bbbbbb....B7bbbbbb|\n"
            "stage 1 "
            "|....F0..F1..F2..........B0bbF3......B1bbF4......B2bbF5......B3bbF6......B4bbF7......B5bb........B6bb....."
            "...B7bb........|\n"
            "stage 2 "
            "|......F0..F1........B0bbF2......B1bbF3......B2bbF4......B3bbF5......B4bbF6......B5bbF7......B6bb........"
            "B7bb............|\n"
            "stage 3 "
            "|........F0ffB0bbbbbbF1ffB1bbbbbbF2ffB2bbbbbbF3ffB3bbbbbbF4ffB4bbbbbbF5ffB5bbbbbbF6ffB6bbbbbbF7ffB7bbbbbb."
            "...............|\n"
            "stage 0: bubble fraction 0.2000, peak in-flight activations 4, peak kept unit activations 8\n"
            "stage 1: bubble fraction 0.6000, peak in-flight activations 3, peak kept unit activations 3\n"
            "stage 2: bubble fraction 0.6000, peak in-flight activations 2, peak kept unit activations 2\n"
            "stage 3: bubble fraction 0.2000, peak in-flight activations 1, peak kept unit activations 2\n"
            "overall: bubble fraction 0.4000, makespan 60\n"
            "step programs of 4 ranks simulated: OK\n");
}

TEST(ScheduleCommandTest, SimulatesTwoStagesOfZeroBubbleH1) {
  const std::string path = WriteConfig(
      "pp2_zb.pbtxt", "parallel { dp: 2 pp: 2 pipeline_schedule: ZERO_BUBBLE_H1 } gradient_accumulation_steps: 8");
  const Result r = Schedule({path, "--simulate", "--world-size", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Body(r.out),
            "chunks (partitioned by cost): 0 = embed..h.1 (stage 0), 1 = h.2..head (stage 1)\n"
            "ZERO_BUBBLE_H1 timeline, per unit F 1 B 1 W 1, one character = 1.5:\n"
            "stage 0 |F0F1..B0W0F2B1W1F3B2W2F4B3W3F5B4W4F6B5W5F7B6W6B7W7|\n"
            "stage 1 |..F0B0F1B1W0F2B2W1F3B3W2F4B4W3F5B5W4F6B6W5F7B7W6W7|\n"
            "stage 0: bubble fraction 0.0400, peak in-flight activations 2, peak kept unit activations 6\n"
            "stage 1: bubble fraction 0.0400, peak in-flight activations 2, peak kept unit activations 6\n"
            "overall: bubble fraction 0.0400, makespan 75\n"
            "step programs of 4 ranks simulated: OK\n");
}

TEST(ScheduleCommandTest, ExplicitPartitionAndCosts) {
  const std::string path =
      WriteConfig("pp2_gpipe.pbtxt",
                  "parallel { pp: 2 pipeline_schedule: GPIPE pp_partition: [1, 5] } gradient_accumulation_steps: 2");
  const Result r = Schedule({path, "--simulate", "--costs", "2,1,0.5"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Body(r.out),
            "chunks (engine.parallel.pp_partition): 0 = embed (stage 0), 1 = h.0..head (stage 1)\n"
            "GPIPE timeline, per unit F 2 B 1 W 0.5, one character = 0.75:\n"
            "stage 0 |F0fF1..................................B0........B1|\n"
            "stage 1 |...F0fffffffffffF1fffffffffffB0bbbbbbbbB1bbbbbbbb..|\n"
            "stage 0: bubble fraction 0.8182, peak in-flight activations 2, peak kept unit activations 2\n"
            "stage 1: bubble fraction 0.0909, peak in-flight activations 2, peak kept unit activations 10\n"
            "overall: bubble fraction 0.4545, makespan 38.5\n"
            "step programs of 2 ranks simulated: OK\n");
}

TEST(ScheduleCommandTest, InterleavedProgramOfOneRank) {
  const std::string path = WriteConfig(
      "pp2_v3.pbtxt",
      "parallel { pp: 2 virtual_stages: 3 pipeline_schedule: INTERLEAVED_1F1B } gradient_accumulation_steps: 2");
  const Result r = Schedule({path, "--rank", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Each transfer carries one micro-batch's (8 x 16, 32) f32 activation or
  // its gradient: 8 x 16 x 32 x 4 = 16384 bytes.
  EXPECT_EQ(r.out, path +
                       " (gpt2): GPT-2 n_layer=4 n_head=2 n_embd=32 vocab_size=256 seq_len=16: 59584 parameters; dp=1, "
                       "pp=2 x 3 virtual stages (INTERLEAVED_1F1B), ZeRO stage 3, 2 micro-batches; train program of "
                       "rank 1 (stage 1, dp rank 0): 6 units, 1 bucket, 54 actions\n"
                       "BEGIN_STEP\n"
                       "RECV_ACT mb=0 unit=h.0 peer=0 bytes=16384\n"
                       "GATHER unit=h.0 bytes=50816\n"
                       "GATHER unit=h.2 bytes=50816\n"
                       "WAIT_GATHER unit=h.0\n"
                       "RECV_ACT mb=1 unit=h.0 peer=0 bytes=16384\n"
                       "FORWARD mb=0 unit=h.0\n"
                       "SEND_ACT mb=0 unit=h.0 peer=0 bytes=16384\n"
                       "RECV_ACT mb=0 unit=h.2 peer=0 bytes=16384\n"
                       "FORWARD mb=1 unit=h.0\n"
                       "SEND_ACT mb=1 unit=h.0 peer=0 bytes=16384\n"
                       "GATHER unit=head bytes=256\n"
                       "WAIT_GATHER unit=h.2\n"
                       "RECV_ACT mb=1 unit=h.2 peer=0 bytes=16384\n"
                       "FORWARD mb=0 unit=h.2\n"
                       "SEND_ACT mb=0 unit=h.2 peer=0 bytes=16384\n"
                       "RECV_ACT mb=0 unit=head peer=0 bytes=16384\n"
                       "FORWARD mb=1 unit=h.2\n"
                       "SEND_ACT mb=1 unit=h.2 peer=0 bytes=16384\n"
                       "GATHER unit=embed bytes=34816\n"
                       "WAIT_GATHER unit=head\n"
                       "WAIT_GATHER unit=embed\n"
                       "FORWARD mb=0 unit=head\n"
                       "RECV_ACT mb=1 unit=head peer=0 bytes=16384\n"
                       "BACKWARD mb=0 unit=head\n"
                       "SEND_GRAD mb=0 unit=head peer=0 bytes=16384\n"
                       "FORWARD mb=1 unit=head\n"
                       "RECV_GRAD mb=0 unit=h.2 peer=0 bytes=16384\n"
                       "BACKWARD mb=1 unit=head\n"
                       "SEND_GRAD mb=1 unit=head peer=0 bytes=16384\n"
                       "RECV_GRAD mb=1 unit=h.2 peer=0 bytes=16384\n"
                       "BACKWARD mb=0 unit=h.2\n"
                       "SEND_GRAD mb=0 unit=h.2 peer=0 bytes=16384\n"
                       "RECV_GRAD mb=0 unit=h.0 peer=0 bytes=16384\n"
                       "BACKWARD mb=1 unit=h.2\n"
                       "SEND_GRAD mb=1 unit=h.2 peer=0 bytes=16384\n"
                       "RECV_GRAD mb=1 unit=h.0 peer=0 bytes=16384\n"
                       "BACKWARD mb=0 unit=h.0\n"
                       "SEND_GRAD mb=0 unit=h.0 peer=0 bytes=16384\n"
                       "BACKWARD mb=1 unit=h.0\n"
                       "SEND_GRAD mb=1 unit=h.0 peer=0 bytes=16384\n"
                       "REDUCE bucket=embed..head bytes=136704\n"
                       "WAIT_REDUCE bucket=embed..head\n"
                       "RELEASE unit=embed\n"
                       "RELEASE unit=h.0\n"
                       "RELEASE unit=h.2\n"
                       "RELEASE unit=head\n"
                       "OPTIMIZER:\n"
                       "TIED_REDUCE unit=embed bytes=34816\n"
                       "NORM_PARTIAL bucket=embed..head\n"
                       "REDUCE_NORM bytes=20\n"
                       "UPDATE bucket=embed..head\n"
                       "PUBLISH bucket=embed..head\n"
                       "TIED_PUBLISH unit=embed bytes=34816\n"
                       "SCALER_UPDATE\n"
                       "actions by kind:\n"
                       "  FORWARD                     6\n"
                       "  BACKWARD                    6\n"
                       "  GATHER                      4\n"
                       "  WAIT_GATHER                 4\n"
                       "  RELEASE                     4\n"
                       "  REDUCE                      1\n"
                       "  WAIT_REDUCE                 1\n"
                       "  SEND_ACT                    4\n"
                       "  RECV_ACT                    6\n"
                       "  SEND_GRAD                   6\n"
                       "  RECV_GRAD                   4\n"
                       "  BEGIN_STEP                  1\n"
                       "  TIED_REDUCE                 1\n"
                       "  NORM_PARTIAL                1\n"
                       "  REDUCE_NORM                 1\n"
                       "  UPDATE                      1\n"
                       "  PUBLISH                     1\n"
                       "  SCALER_UPDATE               1\n"
                       "  TIED_PUBLISH                1\n"
                       "  total                      54\n"
                       "collectives per step (calls, bytes this rank sends):\n"
                       "  dp AllGather                4 calls            0 bytes\n"
                       "  dp ReduceScatter            1 call             0 bytes\n"
                       "  embed AllReduce             1 call         34816 bytes\n"
                       "  embed Broadcast             1 call             0 bytes\n"
                       "  pp Send                    10 calls       163840 bytes\n"
                       "  pp Recv                    10 calls            0 bytes\n"
                       "  world AllReduce             1 call            20 bytes\n"
                       "  control AllGather           1 call  (BEGIN_STEP's batch-signature agreement; control "
                       "traffic, not counted)\n"
                       "prediction for rank 1 (every rank's program simulated, 2 ranks):\n"
                       "  peak gathered units         4\n"
                       "  peak kept activations       5\n"
                       "  verdict: OK\n");
}

// dp 2 of 16 sequences in 2 micro-batches: 4 rows of 16 tokens, so stage
// 0 sends embed's (4 x 16, 32) f32 output, 8192 bytes, and receives its
// gradient, per micro-batch.
TEST(ScheduleCommandTest, TransfersCarryTheMicroBatchActivationBytes) {
  const std::string path =
      WriteConfig("pp2_dp2_bytes.pbtxt",
                  "parallel { dp: 2 pp: 2 pipeline_schedule: GPIPE pp_partition: [1, 5] } gradient_accumulation_steps: 2");
  const Result r = Schedule({path, "--rank", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {"SEND_ACT mb=0 unit=embed peer=1 bytes=8192\n", "SEND_ACT mb=1 unit=embed peer=1 bytes=8192\n",
                           "RECV_GRAD mb=0 unit=embed peer=1 bytes=8192\n",
                           "RECV_GRAD mb=1 unit=embed peer=1 bytes=8192\n",
                           "  pp Send                     2 calls        16384 bytes\n",
                           "  pp Recv                     2 calls            0 bytes\n"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " in\n" << r.out;
  }
  const Result last = Schedule({path, "--rank", "3"});
  ASSERT_EQ(last.code, 0) << last.err;
  for (const char* line : {"RECV_ACT mb=0 unit=h.0 peer=0 bytes=8192\n", "SEND_GRAD mb=1 unit=h.0 peer=0 bytes=8192\n"}) {
    EXPECT_NE(last.out.find(line), std::string::npos) << line << " in\n" << last.out;
  }
}

TEST(ScheduleCommandTest, OneStageSimulates) {
  const std::string path = WriteConfig("pp1.pbtxt", "gradient_accumulation_steps: 2");
  const Result r = Schedule({path, "--simulate"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Body(r.out),
            "chunks (one stage): 0 = embed..head (stage 0)\n"
            "ONE_F_ONE_B timeline, per unit F 1 B 1 W 1, one character = 3:\n"
            "stage 0 |F0B0bbF1B1bb|\n"
            "stage 0: bubble fraction 0.0000, peak in-flight activations 1, peak kept unit activations 6\n"
            "overall: bubble fraction 0.0000, makespan 36\n"
            "step programs of 1 rank simulated: OK\n");
}

// The NVMe tier's streaming: chunks of 4096 elements (49152 bytes over the
// master and AdamW's two kinds) through 2 slots; the first loads after the
// first and second FORWARD, each waiting for the previous step's last store
// into its slot.
TEST(ScheduleCommandTest, PrintsTheOffloadStreamingActions) {
  const std::string path = WriteConfig(
      "offload.pbtxt",
      "parallel { dp: 2 } offload { optimizer_state: NVME master_weights: NVME nvme_dir: \"/tmp\" buffer_count: 2 "
      "buffer_bytes: 49152 }");
  const Result r = Schedule({path, "--rank", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string streamed;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    for (const char* kind : {"LOAD ", "WAIT_LOAD ", "STORE ", "WAIT_STORE ", "UPDATE ", "PUBLISH ",
                             "FORWARD ", "OPTIMIZER:", "SCALER_UPDATE", "  verdict"}) {
      if (line.rfind(kind, 0) == 0) {
        streamed += line + "\n";
        break;
      }
    }
  }
  EXPECT_EQ(streamed,
            "FORWARD mb=0 unit=embed\n"
            "LOAD unit=embed chunk=0 slot=0\n"
            "FORWARD mb=0 unit=h.0\n"
            "LOAD unit=embed chunk=1 slot=1\n"
            "FORWARD mb=0 unit=h.1\n"
            "FORWARD mb=0 unit=h.2\n"
            "FORWARD mb=0 unit=h.3\n"
            "FORWARD mb=0 unit=head\n"
            "OPTIMIZER:\n"
            "WAIT_LOAD unit=embed chunk=0 slot=0\n"
            "UPDATE bucket=embed..head chunk=0 slot=0\n"
            "STORE unit=embed chunk=0 slot=0\n"
            "LOAD unit=h.0 chunk=2 slot=0\n"
            "WAIT_LOAD unit=embed chunk=1 slot=1\n"
            "UPDATE bucket=embed..head chunk=1 slot=1\n"
            "STORE unit=embed chunk=1 slot=1\n"
            "LOAD unit=h.0 chunk=3 slot=1\n"
            "WAIT_LOAD unit=h.0 chunk=2 slot=0\n"
            "UPDATE bucket=embed..head chunk=2 slot=0\n"
            "STORE unit=h.0 chunk=2 slot=0\n"
            "LOAD unit=h.1 chunk=4 slot=0\n"
            "WAIT_LOAD unit=h.0 chunk=3 slot=1\n"
            "UPDATE bucket=embed..head chunk=3 slot=1\n"
            "STORE unit=h.0 chunk=3 slot=1\n"
            "LOAD unit=h.1 chunk=5 slot=1\n"
            "WAIT_LOAD unit=h.1 chunk=4 slot=0\n"
            "UPDATE bucket=embed..head chunk=4 slot=0\n"
            "STORE unit=h.1 chunk=4 slot=0\n"
            "LOAD unit=h.2 chunk=6 slot=0\n"
            "WAIT_LOAD unit=h.1 chunk=5 slot=1\n"
            "UPDATE bucket=embed..head chunk=5 slot=1\n"
            "STORE unit=h.1 chunk=5 slot=1\n"
            "LOAD unit=h.2 chunk=7 slot=1\n"
            "WAIT_LOAD unit=h.2 chunk=6 slot=0\n"
            "UPDATE bucket=embed..head chunk=6 slot=0\n"
            "STORE unit=h.2 chunk=6 slot=0\n"
            "LOAD unit=h.3 chunk=8 slot=0\n"
            "WAIT_LOAD unit=h.2 chunk=7 slot=1\n"
            "UPDATE bucket=embed..head chunk=7 slot=1\n"
            "STORE unit=h.2 chunk=7 slot=1\n"
            "LOAD unit=h.3 chunk=9 slot=1\n"
            "WAIT_LOAD unit=h.3 chunk=8 slot=0\n"
            "UPDATE bucket=embed..head chunk=8 slot=0\n"
            "STORE unit=h.3 chunk=8 slot=0\n"
            "LOAD unit=head chunk=10 slot=0\n"
            "WAIT_LOAD unit=h.3 chunk=9 slot=1\n"
            "UPDATE bucket=embed..head chunk=9 slot=1\n"
            "STORE unit=h.3 chunk=9 slot=1\n"
            "WAIT_LOAD unit=head chunk=10 slot=0\n"
            "UPDATE bucket=embed..head chunk=10 slot=0\n"
            "STORE unit=head chunk=10 slot=0\n"
            "PUBLISH bucket=embed..head\n"
            "SCALER_UPDATE\n"
            "  verdict: OK\n");
}

// The parameter shards on NVMe (stage 3, prefetch 1, a bucket per unit):
// two param slots; each shard's LOAD right after the WAIT_GATHER that frees
// its slot (the first two after BEGIN_STEP, behind the previous step's last
// stores), WAIT_LOAD right before its GATHER, and each updated unit's shard
// loaded before its UPDATE and stored after its bucket's PUBLISH.
TEST(ScheduleCommandTest, PrintsTheParamShardActions) {
  const std::string path =
      WriteConfig("offload_params.pbtxt", "parallel { dp: 2 } offload { params: NVME nvme_dir: \"/tmp\" }");
  const Result r = Schedule({path, "--rank", "0", "--set", "engine.zero.bucket_bytes=4096"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string streamed;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const bool shard = line.find(" param_slot=") != std::string::npos;
    for (const char* kind : {"BEGIN_STEP", "GATHER ", "WAIT_GATHER ", "UPDATE ", "PUBLISH ", "OPTIMIZER:", "  verdict"}) {
      if (shard || line.rfind(kind, 0) == 0) {
        streamed += line + "\n";
        break;
      }
    }
  }
  EXPECT_EQ(streamed,
            "BEGIN_STEP\n"
            "WAIT_STORE unit=h.3 param_slot=0\n"
            "LOAD unit=embed param_slot=0\n"
            "WAIT_STORE unit=head param_slot=1\n"
            "LOAD unit=h.0 param_slot=1\n"
            "WAIT_LOAD unit=embed param_slot=0\n"
            "GATHER unit=embed bytes=17408\n"
            "WAIT_LOAD unit=h.0 param_slot=1\n"
            "GATHER unit=h.0 bytes=25408\n"
            "WAIT_GATHER unit=embed\n"
            "LOAD unit=h.1 param_slot=0\n"
            "WAIT_LOAD unit=h.1 param_slot=0\n"
            "GATHER unit=h.1 bytes=25408\n"
            "WAIT_GATHER unit=h.0\n"
            "LOAD unit=h.2 param_slot=1\n"
            "WAIT_LOAD unit=h.2 param_slot=1\n"
            "GATHER unit=h.2 bytes=25408\n"
            "WAIT_GATHER unit=h.1\n"
            "LOAD unit=h.3 param_slot=0\n"
            "WAIT_LOAD unit=h.3 param_slot=0\n"
            "GATHER unit=h.3 bytes=25408\n"
            "WAIT_GATHER unit=h.2\n"
            "LOAD unit=head param_slot=1\n"
            "WAIT_LOAD unit=head param_slot=1\n"
            "GATHER unit=head bytes=128\n"
            "WAIT_GATHER unit=h.3\n"
            "LOAD unit=h.3 param_slot=0\n"
            "WAIT_GATHER unit=head\n"
            "LOAD unit=h.2 param_slot=1\n"
            "WAIT_LOAD unit=h.3 param_slot=0\n"
            "GATHER unit=h.3 bytes=25408\n"
            "WAIT_LOAD unit=h.2 param_slot=1\n"
            "GATHER unit=h.2 bytes=25408\n"
            "WAIT_GATHER unit=h.3\n"
            "LOAD unit=h.1 param_slot=0\n"
            "WAIT_LOAD unit=h.1 param_slot=0\n"
            "GATHER unit=h.1 bytes=25408\n"
            "WAIT_GATHER unit=h.2\n"
            "LOAD unit=h.0 param_slot=1\n"
            "WAIT_LOAD unit=h.0 param_slot=1\n"
            "GATHER unit=h.0 bytes=25408\n"
            "WAIT_GATHER unit=h.1\n"
            "LOAD unit=embed param_slot=0\n"
            "WAIT_GATHER unit=h.0\n"
            "LOAD unit=h.0 param_slot=1\n"
            "OPTIMIZER:\n"
            "WAIT_LOAD unit=embed param_slot=0\n"
            "UPDATE bucket=embed\n"
            "PUBLISH bucket=embed\n"
            "STORE unit=embed param_slot=0\n"
            "WAIT_STORE unit=embed param_slot=0\n"
            "LOAD unit=h.1 param_slot=0\n"
            "WAIT_LOAD unit=h.0 param_slot=1\n"
            "UPDATE bucket=h.0\n"
            "PUBLISH bucket=h.0\n"
            "STORE unit=h.0 param_slot=1\n"
            "WAIT_STORE unit=h.0 param_slot=1\n"
            "LOAD unit=h.2 param_slot=1\n"
            "WAIT_LOAD unit=h.1 param_slot=0\n"
            "UPDATE bucket=h.1\n"
            "PUBLISH bucket=h.1\n"
            "STORE unit=h.1 param_slot=0\n"
            "WAIT_STORE unit=h.1 param_slot=0\n"
            "LOAD unit=h.3 param_slot=0\n"
            "WAIT_LOAD unit=h.2 param_slot=1\n"
            "UPDATE bucket=h.2\n"
            "PUBLISH bucket=h.2\n"
            "STORE unit=h.2 param_slot=1\n"
            "WAIT_STORE unit=h.2 param_slot=1\n"
            "LOAD unit=head param_slot=1\n"
            "WAIT_LOAD unit=h.3 param_slot=0\n"
            "UPDATE bucket=h.3\n"
            "PUBLISH bucket=h.3\n"
            "STORE unit=h.3 param_slot=0\n"
            "WAIT_LOAD unit=head param_slot=1\n"
            "UPDATE bucket=head\n"
            "PUBLISH bucket=head\n"
            "STORE unit=head param_slot=1\n"
            "  verdict: OK\n");
}

TEST(ScheduleCommandTest, BadInputs) {
  const std::string path = WriteConfig("pp2.pbtxt", "parallel { pp: 2 } gradient_accumulation_steps: 2");
  Result r = Schedule({path, "--simulate", "--costs", "1,x,1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "zeroshard schedule: --costs: '1,x,1' is not three numbers F,B,W >= 0 (not all 0), e.g. 1,1,1\n");
  r = Schedule({path, "--costs", "0,0,0"});
  EXPECT_EQ(r.code, 2);
  r = Schedule({path, "--set", "engine.parallel.pp_partition=2", "--set", "engine.parallel.pp_partition=3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, path + ": invalid config:\nengine.parallel.pp_partition: sums to 5, expected the model's 6 units\n");
  r = Schedule({path, "--set", "engine.parallel.pp=8", "--set", "engine.gradient_accumulation_steps=8"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, path + ": invalid config:\nengine.parallel.pp: 8 exceeds the model's 6 units\n");
  r = Schedule({path, "--set", "engine.parallel.pipeline_schedule=ZERO_BUBBLE_H1", "--set",
                "engine.gradient_accumulation_steps=1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, path +
                       ": invalid config:\nengine.parallel.pipeline_schedule: ZERO_BUBBLE_H1 needs "
                       "engine.gradient_accumulation_steps (1) >= engine.parallel.pp (2)\n");
  r = Schedule({path, "--rank", "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "zeroshard schedule: --rank: 2 is outside [0, 2) for a world of 2 ranks\n");
}

TEST(ScheduleCommandTest, ProfilePredictsOneRanksStepAsItsUnitsCompute) {
  const std::string config = WriteConfig("one_rank.pbtxt", "");
  const std::string profile = TempPath("one_rank_profile.pbtxt");
  ASSERT_TRUE(WriteCostProfile(Profile(), profile).ok());
  const Result r = Schedule({config, "--profile", profile, "--set", "engine.zero.stage=0"});
  ASSERT_EQ(r.code, 0) << r.err;
  // 6 units x (1 + 2) ms, nothing to communicate on one rank.
  EXPECT_TRUE(absl::StrContains(r.out, "predicted step (cost profile " + profile +
                                           "): 18.0 ms; compute 18.0 ms, optimizer 0.0 ms, collectives 0.0 ms, "
                                           "exposed 0.0 ms\n"))
      << r.out;
  // Two micro-batches of half the rows: the same compute.
  const Result m2 = Schedule({config, "--profile", profile, "--set", "engine.zero.stage=0", "--set",
                                 "engine.gradient_accumulation_steps=2"});
  ASSERT_EQ(m2.code, 0) << m2.err;
  EXPECT_TRUE(absl::StrContains(m2.out, "): 18.0 ms; compute 18.0 ms")) << m2.out;
}

TEST(ScheduleCommandTest, SuggestNeedsAProfileAndAWorldSize) {
  const std::string config = WriteConfig("suggest_flags.pbtxt", "");
  Result r = Schedule({config, "--suggest", "--world-size", "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--suggest needs --profile PROFILE")) << r.err;
  const std::string profile = TempPath("flags_profile.pbtxt");
  ASSERT_TRUE(WriteCostProfile(Profile(), profile).ok());
  r = Schedule({config, "--suggest", "--profile", profile, "--world-size", "2"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "\nbest: --set engine.parallel.dp=")) << r.out;
  r = Schedule({config, "--profile", TempPath("missing.pbtxt")});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--profile: ")) << r.err;
}

TEST(ScheduleCommandTest, SuggestRanksFeasibleLayoutsAndEndsWithTheBestAsFlags) {
  const std::string config = WriteConfig("suggest.pbtxt", "");
  absl::StatusOr<std::vector<LayoutChoice>> choices = SuggestLayouts(config, {"engine.zero.stage=1"}, 2, Profile());
  ASSERT_TRUE(choices.ok()) << choices.status();
  ASSERT_FALSE(choices->empty());
  const LayoutChoice& best = choices->front();
  ASSERT_TRUE(best.feasible && best.priced) << best.verdict;
  bool saw_tp = false, saw_refused = false;
  for (const LayoutChoice& c : *choices) {
    EXPECT_EQ(c.dp * c.tp * c.pp, 2);
    if (c.feasible && c.priced) {
      EXPECT_LE(best.prediction.step_seconds, c.prediction.step_seconds);
    }
    if (c.tp == 2 && c.feasible) {
      saw_tp = true;
      EXPECT_FALSE(c.priced);
      EXPECT_TRUE(absl::StrContains(c.verdict, "tp collectives not priced (profiled at tp 1)")) << c.verdict;
    }
    if (c.pp == 2 && c.schedule == "ZERO_BUBBLE_H1" && c.micro_batches == 1) {
      saw_refused = true;
      EXPECT_FALSE(c.feasible);
      EXPECT_TRUE(absl::StrContains(c.verdict, "ZERO_BUBBLE_H1 needs engine.gradient_accumulation_steps (1) >= "
                                               "engine.parallel.pp (2)"))
          << c.verdict;
    }
  }
  EXPECT_TRUE(saw_tp);
  EXPECT_TRUE(saw_refused);
  // dp 2 halves each rank's micro-batch: below one rank's 18 ms.
  EXPECT_LT(best.prediction.step_seconds, 18e-3);

  const std::string table = FormatLayoutChoices(*choices);
  std::string flags;
  for (const std::string& s : best.sets) flags += (flags.empty() ? "" : " ") + std::string("--set ") + s;
  EXPECT_TRUE(absl::EndsWith(table, "\nbest: " + flags + "\n")) << table;
  EXPECT_TRUE(absl::StartsWith(table, "| rank | dp | tp | pp | micro-batches | schedule |")) << table;
}

}  // namespace
}  // namespace zeroshard::cli

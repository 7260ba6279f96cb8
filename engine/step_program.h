// StepProgram: one optimizer step of one rank as an ordered list of actions
// (docs/architecture.md, "The step program").
//
// A program is built before the first step by a pure function of (config,
// model layout, rank coordinates) — engine/data_parallel_program.h for data
// parallelism, engine/pipeline_program.h for a pipeline stage — and run by
// the engine's executor loop, one action after another. Because it is data
// it can be printed (`zeroshard schedule`), compared in tests, and
// simulated across ranks before anything runs (engine/program_simulator.h).
//
// Action kinds and what the executor does for each:
//   FORWARD(unit, mb)          run the unit on micro-batch mb's input (the
//                              batch for unit 0, the received activation
//                              when a RECV_ACT(mb, unit) was posted, else
//                              the output of (unit-1, mb)); keep its saved
//                              activations, or only its input when the unit
//                              is checkpointed
//   BACKWARD(unit, mb)         backpropagate (unit, mb) from its output's
//                              gradient (the received one when a
//                              RECV_GRAD(mb, unit) was posted); frees its
//                              saved activations; accumulates parameter
//                              gradients
//   BACKWARD_INPUT(unit, mb)   the input-gradient half of BACKWARD (same
//                              inputs); keeps what BACKWARD_WEIGHT needs
//   BACKWARD_WEIGHT(unit, mb)  the parameter-gradient half: accumulates
//                              them and frees the saved activations
//                              (zero-bubble schedules)
//   RECOMPUTE(unit, mb)        rebuild the saved activations of a
//                              checkpointed unit from its kept input
//   GATHER(unit)               issue the all-gather of the unit's parameters
//                              (ZeRO-3); WAIT_GATHER(unit) waits for it;
//                              RELEASE(unit) frees the gathered copy
//   REDUCE(bucket)             issue the reduce-scatter of a gradient bucket;
//                              WAIT_REDUCE(bucket) waits and accumulates it
//                              into the gradient shards
//   SEND_ACT(mb, unit, peer)   issue the send of (unit, mb)'s output to
//                              pipeline stage `peer` without waiting; the
//                              executor waits for every send before the
//                              step ends (the buffer lives until then)
//   RECV_ACT(mb, unit, peer)   post the receive of (unit-1, mb)'s output
//                              from stage `peer` without waiting;
//                              FORWARD(unit, mb) waits for it and consumes
//                              it as its input
//   SEND_GRAD(mb, unit, peer)  issue the send of the gradient of (unit,
//                              mb)'s input (what its backward produced) to
//                              stage `peer`; waited like SEND_ACT
//   RECV_GRAD(mb, unit, peer)  post the receive of the gradient of (unit,
//                              mb)'s output from stage `peer`;
//                              BACKWARD / BACKWARD_INPUT(unit, mb) waits
//                              for it and consumes it
//   BEGIN_STEP                 the prologue of a training step: checks and
//                              stages the batches, reserves the reduction
//                              staging and the per-step gradient shards
//                              (sharding/zero_policy.h), agrees with every
//                              rank on the batches' signatures and loss
//                              weight (control traffic, not counted), and
//                              zeroes the gradients. A failure here is
//                              agreed on every rank and leaves the engine
//                              usable.
// The optimizer phase, once the gradients are reduced:
//   TIED_REDUCE(unit)          sum a weight's reduced gradient shard over
//                              the embedding group (both pipeline ends hold
//                              it; the owning end updates it)
//   NORM_PARTIAL(bucket)       the sum of squares of each unit's reduced
//                              gradient shard in the bucket (local)
//   REDUCE_NORM                one all-reduce of [sum of squares, loss,
//                              loss weight, non-finite flag, failures,
//                              metrics]; decides skip, clip, learning rate
//   UPDATE(bucket)             unscale and clip the bucket's gradients,
//                              then the optimizer update of its regions
//                              (stage 0 first all-gathers the reduced
//                              shards: every rank updates the whole buffer)
//   PUBLISH(bucket)            round the bucket's masters into the compute
//                              parameters (stages 1-2 all-gather them)
//   TIED_PUBLISH(unit)         the owning end broadcasts the weight's
//                              updated compute parameters over the
//                              embedding group into the mirror's (which
//                              keeps no master or optimizer state)
//   SCALER_UPDATE              the loss scaler, the step counters, and the
//                              per-step buffers freed
// After a skipped step (overflow), UPDATE and PUBLISH change nothing.
// The NVMe tier's streaming (docs/offload_streaming.md), only when a state
// class lives there (engine.offload): the rank's optimizer regions are cut
// into chunks (StepProgram::chunks), each staged in slot `slot`:
//   LOAD(chunk)                issue the reads of the chunk's streamed
//                              buffers (master, optimizer state) from the
//                              rank's files into its slot, queued behind
//                              the slot's store still in flight, if any
//   WAIT_LOAD(chunk)           wait for them (and that store)
//   STORE(chunk)               issue the writes of the slot back to the files
//   WAIT_STORE(chunk)          wait for them; nothing when the chunk has no
//                              STORE in flight (the first step's waits for
//                              the previous step's last stores)
//   UPDATE(bucket, chunk)      UPDATE of one chunk: its unit's gradients
//                              unscaled and clipped at its first chunk, the
//                              optimizer's update of the chunk's elements
//                              in the slot, its masters rounded into the
//                              compute parameters; PUBLISH then only
//                              all-gathers (stages 1-2)
// With engine.offload.params: NVME (stage 3) the rank's compute-dtype
// parameter shard of each unit lives in a file too and is staged in a
// second pool of param slots (StepProgram::param_slots; the action's
// param_slot, chunk -1; engine/param_offload_program.h):
//   LOAD(unit)                 issue the read of the unit's shard into the
//                              param slot
//   WAIT_LOAD(unit)            wait for it; the unit's shard is the slot's
//                              (GATHER all-gathers it, UPDATE / PUBLISH
//                              round into it) until the slot is reused
//   STORE(unit)                issue the write of the slot's shard back
//   WAIT_STORE(unit)           wait for it (nothing when none is in flight)
// A transfer is identified by (the two stages, micro-batch, kind, chunk
// boundary): SEND_ACT of unit u matches RECV_ACT of unit u+1, SEND_GRAD of
// unit u matches RECV_GRAD of unit u-1; several may be in flight between
// the same two stages (interleaved schedules cross a boundary both ways).
//
// Every action lists the collectives it issues (`issues`), with the bytes
// CommStats counts for them, so a program's communication can be predicted
// per group and compared with what a run records.
#ifndef ZEROSHARD_ENGINE_STEP_PROGRAM_H_
#define ZEROSHARD_ENGINE_STEP_PROGRAM_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/comm_stats.h"

namespace zeroshard {

enum class ActionKind : uint8_t {
  kForward,
  kBackward,
  kBackwardInput,
  kBackwardWeight,
  kRecompute,
  kGather,
  kWaitGather,
  kRelease,
  kReduce,
  kWaitReduce,
  kSendAct,
  kRecvAct,
  kSendGrad,
  kRecvGrad,
  // The step's prologue and the optimizer phase.
  kBeginStep,
  kTiedReduce,
  kNormPartial,
  kReduceNorm,
  kUpdate,
  kPublish,
  kScalerUpdate,
  // The NVMe tier's streaming.
  kLoad,
  kWaitLoad,
  kStore,
  kWaitStore,
  // Appended to the optimizer phase's kinds: the numbering stays stable.
  kTiedPublish,
};
inline constexpr int kNumActionKinds = 26;

// Whether the kind belongs to the optimizer phase (TIED_REDUCE through
// SCALER_UPDATE, TIED_PUBLISH): FormatProgram heads them with "OPTIMIZER:".
bool IsOptimizerPhase(ActionKind kind);
// LOAD, WAIT_LOAD, STORE, WAIT_STORE: placed in backward and in the
// optimizer phase alike, so FormatProgram's "OPTIMIZER:" heading ignores them.
bool IsOffloadIo(ActionKind kind);

// "FORWARD", "BACKWARD", "BACKWARD_INPUT", "BACKWARD_WEIGHT", "RECOMPUTE",
// "GATHER", "WAIT_GATHER", "RELEASE", "REDUCE", "WAIT_REDUCE", "SEND_ACT",
// "RECV_ACT", "SEND_GRAD", "RECV_GRAD", "BEGIN_STEP", "TIED_REDUCE",
// "NORM_PARTIAL", "REDUCE_NORM", "UPDATE", "PUBLISH", "SCALER_UPDATE",
// "LOAD", "WAIT_LOAD", "STORE", "WAIT_STORE", "TIED_PUBLISH".
const char* ActionKindName(ActionKind kind);
// The inverse; kInvalidArgument listing the kinds for anything else.
absl::StatusOr<ActionKind> ParseActionKind(absl::string_view name);

// One collective (or point-to-point transfer) an action issues.
struct IssuedCollective {
  // "dp" (the group ZeRO shards over: under hybrid sharding the shard
  // group), "dp_replica" (hybrid sharding's replica group), "tp", "pp",
  // "world", "embed".
  std::string group;
  CommOp op = CommOp::kAllReduce;
  // Per rank, in CommStats::Record's convention: AllGather's input,
  // ReduceScatter's output, the AllReduce/Send/Recv buffer, in bytes.
  int64_t bytes_per_rank = 0;
  std::string what;  // "params h.3", "grads h.0..h.3", "norm, loss, overflow"

  bool operator==(const IssuedCollective& o) const {
    return group == o.group && op == o.op && bytes_per_rank == o.bytes_per_rank && what == o.what;
  }
};

struct Action {
  ActionKind kind = ActionKind::kForward;
  int micro_batch = -1;  // compute and transfer actions; -1 otherwise
  int unit = -1;         // compute, gather, release and transfer actions; -1 otherwise
  int bucket = -1;       // REDUCE / WAIT_REDUCE; -1 otherwise
  int peer_stage = -1;   // transfers: the other pipeline stage; -1 otherwise
  int chunk = -1;        // LOAD / WAIT_LOAD / STORE / WAIT_STORE and a streamed UPDATE; -1 otherwise
  int slot = -1;         // the chunk's staging slot where chunk is set; -1 otherwise
  // LOAD / WAIT_LOAD / STORE / WAIT_STORE of a unit's parameter shard: its
  // param slot (chunk is -1); -1 otherwise.
  int param_slot = -1;
  std::vector<IssuedCollective> issues;

  bool operator==(const Action& o) const {
    return kind == o.kind && micro_batch == o.micro_batch && unit == o.unit && bucket == o.bucket &&
           peer_stage == o.peer_stage && chunk == o.chunk && slot == o.slot && param_slot == o.param_slot &&
           issues == o.issues;
  }
};

// One chunk of the NVMe tier's streaming: elements [begin, begin + length)
// of `unit`'s optimizer region (the master's region: relative to
// UnitShard::master_begin), updated by UPDATE(bucket), staged in `slot`.
struct OffloadChunk {
  int unit = -1;
  int bucket = -1;
  int64_t begin = 0;
  int64_t length = 0;
  int slot = 0;

  bool operator==(const OffloadChunk& o) const {
    return unit == o.unit && bucket == o.bucket && begin == o.begin && length == o.length && slot == o.slot;
  }
};

// What the program's text form prints for units and buckets.
struct ProgramNames {
  std::vector<std::string> units;    // by unit index
  std::vector<std::string> buckets;  // by bucket index: "h.3", "h.0..h.3"
};

struct StepProgram {
  std::vector<Action> actions;
  int micro_batches = 0;
  int num_units = 0;
  int num_buckets = 0;
  ProgramNames names;
  // By bucket: the units that run backward and whose BACKWARD (or
  // BACKWARD_WEIGHT) adds to its gradients, its own units and those
  // borrowing from them; each REDUCE of
  // the bucket must follow a backward of every one of them since the
  // bucket's previous REDUCE (engine/program_simulator.h). Empty or short:
  // no such check for the buckets it leaves out.
  std::vector<std::vector<int>> bucket_writers;
  // The NVMe tier's chunks in update order (empty: nothing streams), the
  // number of staging slots they cycle through (chunk c in slot
  // c % offload_slots) and the elements of a whole chunk.
  std::vector<OffloadChunk> chunks;
  int offload_slots = 0;
  int64_t chunk_elements = 0;
  // The chunks carry the gradient shard's piece (engine.offload.grads:
  // NVME): the shard is stored at its reduction (and a tied unit's again at
  // TIED_REDUCE), and a chunk reads its piece at its LOAD when that is in
  // the optimizer phase, else at its WAIT_LOAD.
  bool streams_grads = false;
  // engine.offload.params: NVME: the param slots the parameter shards'
  // LOAD / STORE cycle through (0: no parameter shard streams).
  int param_slots = 0;
};

// One line per action: the kind, then "mb=<m>" / "unit=<name>" /
// "bucket=<name>" / "peer=<stage>" / "chunk=<c> slot=<s>" / "param_slot=<s>"
// where they apply,
// then "bytes=<n>" (the
// sum of its collectives' per-rank bytes) when it communicates, e.g.
//   GATHER unit=h.3 bytes=12544
//   FORWARD mb=0 unit=h.3
//   REDUCE bucket=h.2..h.3 bytes=6272
//   RECV_ACT mb=1 unit=h.4 peer=0 bytes=16384
//   LOAD unit=h.0 chunk=3 slot=1
std::string FormatAction(const StepProgram& program, const Action& action);
// One FormatAction per line; the optimizer phase headed by a line "OPTIMIZER:".
std::string FormatProgram(const StepProgram& program);

// Per (group, op): calls and the bytes this rank sends, computed exactly as
// CommStats::Record counts them for a group of `group_sizes[group]` ranks
// (a group missing there counts as one rank; a Broadcast as a non-root's).
struct CollectiveTotals {
  int64_t calls = 0;
  int64_t bytes_sent = 0;
};
using CollectivesByGroup = std::map<std::pair<std::string, CommOp>, CollectiveTotals>;
CollectivesByGroup CountCollectives(const StepProgram& program, const std::map<std::string, int>& group_sizes);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STEP_PROGRAM_H_

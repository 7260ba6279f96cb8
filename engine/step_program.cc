#include "engine/step_program.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {
namespace {

constexpr ActionKind kAllKinds[kNumActionKinds] = {
    ActionKind::kForward,   ActionKind::kBackward,   ActionKind::kBackwardInput, ActionKind::kBackwardWeight,
    ActionKind::kRecompute, ActionKind::kGather,     ActionKind::kWaitGather,    ActionKind::kRelease,
    ActionKind::kReduce,    ActionKind::kWaitReduce, ActionKind::kSendAct,       ActionKind::kRecvAct,
    ActionKind::kSendGrad,  ActionKind::kRecvGrad,   ActionKind::kBeginStep,     ActionKind::kTiedReduce,
    ActionKind::kNormPartial, ActionKind::kReduceNorm, ActionKind::kUpdate,      ActionKind::kPublish,
    ActionKind::kScalerUpdate, ActionKind::kLoad,      ActionKind::kWaitLoad,     ActionKind::kStore,
    ActionKind::kWaitStore, ActionKind::kTiedPublish,
};

// The name at `index` when there is one, else the index itself.
std::string NameOr(const std::vector<std::string>& names, int index) {
  if (index >= 0 && index < static_cast<int>(names.size()) && !names[index].empty()) return names[index];
  return absl::StrCat(index);
}

}  // namespace

const char* ActionKindName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "FORWARD";
    case ActionKind::kBackward:
      return "BACKWARD";
    case ActionKind::kBackwardInput:
      return "BACKWARD_INPUT";
    case ActionKind::kBackwardWeight:
      return "BACKWARD_WEIGHT";
    case ActionKind::kRecompute:
      return "RECOMPUTE";
    case ActionKind::kGather:
      return "GATHER";
    case ActionKind::kWaitGather:
      return "WAIT_GATHER";
    case ActionKind::kRelease:
      return "RELEASE";
    case ActionKind::kReduce:
      return "REDUCE";
    case ActionKind::kWaitReduce:
      return "WAIT_REDUCE";
    case ActionKind::kSendAct:
      return "SEND_ACT";
    case ActionKind::kRecvAct:
      return "RECV_ACT";
    case ActionKind::kSendGrad:
      return "SEND_GRAD";
    case ActionKind::kRecvGrad:
      return "RECV_GRAD";
    case ActionKind::kBeginStep:
      return "BEGIN_STEP";
    case ActionKind::kTiedReduce:
      return "TIED_REDUCE";
    case ActionKind::kNormPartial:
      return "NORM_PARTIAL";
    case ActionKind::kReduceNorm:
      return "REDUCE_NORM";
    case ActionKind::kUpdate:
      return "UPDATE";
    case ActionKind::kPublish:
      return "PUBLISH";
    case ActionKind::kScalerUpdate:
      return "SCALER_UPDATE";
    case ActionKind::kLoad:
      return "LOAD";
    case ActionKind::kWaitLoad:
      return "WAIT_LOAD";
    case ActionKind::kStore:
      return "STORE";
    case ActionKind::kWaitStore:
      return "WAIT_STORE";
    case ActionKind::kTiedPublish:
      return "TIED_PUBLISH";
  }
  return "UNKNOWN_ACTION";
}

bool IsOptimizerPhase(ActionKind kind) {
  switch (kind) {
    case ActionKind::kTiedReduce:
    case ActionKind::kNormPartial:
    case ActionKind::kReduceNorm:
    case ActionKind::kUpdate:
    case ActionKind::kPublish:
    case ActionKind::kTiedPublish:
    case ActionKind::kScalerUpdate:
      return true;
    default:
      return false;
  }
}

bool IsOffloadIo(ActionKind kind) {
  return kind == ActionKind::kLoad || kind == ActionKind::kWaitLoad || kind == ActionKind::kStore ||
         kind == ActionKind::kWaitStore;
}

absl::StatusOr<ActionKind> ParseActionKind(absl::string_view name) {
  std::vector<std::string> names;
  for (ActionKind kind : kAllKinds) {
    if (name == ActionKindName(kind)) return kind;
    names.push_back(ActionKindName(kind));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown action kind '", name, "', expected one of ", absl::StrJoin(names, ", ")));
}

std::string FormatAction(const StepProgram& program, const Action& action) {
  std::string line = ActionKindName(action.kind);
  if (action.micro_batch >= 0) absl::StrAppend(&line, " mb=", action.micro_batch);
  if (action.unit >= 0) absl::StrAppend(&line, " unit=", NameOr(program.names.units, action.unit));
  if (action.bucket >= 0) absl::StrAppend(&line, " bucket=", NameOr(program.names.buckets, action.bucket));
  if (action.peer_stage >= 0) absl::StrAppend(&line, " peer=", action.peer_stage);
  if (action.chunk >= 0) absl::StrAppend(&line, " chunk=", action.chunk, " slot=", action.slot);
  if (action.param_slot >= 0) absl::StrAppend(&line, " param_slot=", action.param_slot);
  if (!action.issues.empty()) {
    int64_t bytes = 0;
    for (const IssuedCollective& c : action.issues) bytes += c.bytes_per_rank;
    absl::StrAppend(&line, " bytes=", bytes);
  }
  return line;
}

std::string FormatProgram(const StepProgram& program) {
  std::string text;
  bool in_optimizer = false;
  for (const Action& action : program.actions) {
    if (!IsOffloadIo(action.kind)) {
      const bool optimizer = IsOptimizerPhase(action.kind);
      if (optimizer && !in_optimizer) absl::StrAppend(&text, "OPTIMIZER:\n");
      in_optimizer = optimizer;
    }
    absl::StrAppend(&text, FormatAction(program, action), "\n");
  }
  return text;
}

CollectivesByGroup CountCollectives(const StepProgram& program, const std::map<std::string, int>& group_sizes) {
  CollectivesByGroup totals;
  for (const Action& action : program.actions) {
    for (const IssuedCollective& c : action.issues) {
      auto size = group_sizes.find(c.group);
      CommStats stats;
      stats.Record(c.op, size == group_sizes.end() ? 1 : size->second, c.bytes_per_rank, /*is_root=*/false);
      CollectiveTotals& t = totals[{c.group, c.op}];
      ++t.calls;
      t.bytes_sent += stats[c.op].bytes_sent;
    }
  }
  return totals;
}

}  // namespace zeroshard

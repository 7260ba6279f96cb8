#include "engine/testing/program_check.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/comm_stats.h"
#include "engine/step_program.h"

namespace zeroshard {
namespace {

std::string Describe(const CollectivesByGroup& c) {
  std::vector<std::string> parts;
  for (const auto& [key, t] : c) {
    parts.push_back(absl::StrCat(key.first, " ", CommOpName(key.second), ": ", t.calls, " calls, ", t.bytes_sent,
                                 " bytes"));
  }
  return absl::StrJoin(parts, "; ");
}

// The program's name of an engine group: the shard group is "dp".
std::string ProgramGroup(const std::string& engine_group) {
  return engine_group == "dp_shard" ? "dp" : engine_group;
}

}  // namespace

ProgramCheck CheckStepAgainstProgram(Engine& engine, const std::function<void()>& step) {
  const EngineCoordinates at = engine.coordinates();
  const std::map<std::string, int> sizes = {{"dp", at.shard_size}, {"dp_replica", at.replicas}};
  CollectivesByGroup predicted;
  for (const auto& [key, totals] : CountCollectives(engine.train_program(), sizes)) {
    if (sizes.count(key.first) > 0) predicted[key] = totals;
  }
  const std::map<std::string, CommStats> before = engine.comm_stats_by_group();
  step();
  CollectivesByGroup measured;
  for (const auto& [group, stats] : engine.comm_stats_by_group()) {
    const std::string name = ProgramGroup(group);
    if (sizes.count(name) == 0) continue;
    const CommStats ran = stats - before.at(group);
    for (int op = 0; op < kNumCommOps; ++op) {
      const OpCounters& counters = ran[static_cast<CommOp>(op)];
      if (counters.calls == 0 && counters.bytes_sent == 0) continue;
      measured[{name, static_cast<CommOp>(op)}] = {counters.calls, counters.bytes_sent};
    }
  }
  return {Describe(predicted), Describe(measured)};
}

}  // namespace zeroshard

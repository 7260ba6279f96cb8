// `zeroshard check-config FILE [--world-size N] [--set PATH=VALUE ...]`
#ifndef ZEROSHARD_CLI_CHECK_CONFIG_H_
#define ZEROSHARD_CLI_CHECK_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "cli/run_config.h"
#include "cli/subcommand.h"

namespace zeroshard::cli {

extern const Subcommand kCheckConfig;

// The human-readable summary check-config prints for a valid config of any
// kind.
std::string ConfigSummary(const RunConfig& config, int world_size);

// The memory plan of every rank of a `world_size` job (< 1: one per
// pipeline stage's first rank), one table per distinct plan naming its
// ranks, checked against `limit_bytes` (engine/memory_plan.h). *report gets
// the tables; the status is the first rank's CheckMemoryPlan refusal, or a
// planning error.
absl::Status MemoryPlanReport(const RunConfig& config, int world_size, int64_t limit_bytes, std::string* report);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_CHECK_CONFIG_H_

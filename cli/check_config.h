// `zeroshard check-config FILE [--world-size N] [--set PATH=VALUE ...]`
#ifndef ZEROSHARD_CLI_CHECK_CONFIG_H_
#define ZEROSHARD_CLI_CHECK_CONFIG_H_

#include <string>

#include "cli/run_config.h"
#include "cli/subcommand.h"

namespace zeroshard::cli {

extern const Subcommand kCheckConfig;

// The human-readable summary check-config prints for a valid config of any
// kind.
std::string ConfigSummary(const RunConfig& config, int world_size);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_CHECK_CONFIG_H_

// `zeroshard run --np N [--hostfile F] [--max-restarts R] [--min-np M] -- TRAINER ARGS...`
#ifndef ZEROSHARD_CLI_RUN_H_
#define ZEROSHARD_CLI_RUN_H_

#include "cli/subcommand.h"

namespace zeroshard::cli {

extern const Subcommand kRun;

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_RUN_H_

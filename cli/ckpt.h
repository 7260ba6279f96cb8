// `zeroshard ckpt`: offline tools for sharded checkpoints
// (docs/checkpoint_format.md): inspect, verify, consolidate, reshard,
// import, diff. Each DIR is a checkpoint root (its `latest` is followed) or
// one step_<N> directory. Exit codes: 0 success, 1 a failed check (a corrupt
// checkpoint, a difference above the tolerance), 2 bad usage or input.
#ifndef ZEROSHARD_CLI_CKPT_H_
#define ZEROSHARD_CLI_CKPT_H_

#include "cli/subcommand.h"

namespace zeroshard::cli {

extern const Subcommand kCkpt;

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_CKPT_H_

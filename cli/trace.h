// `zeroshard trace FILE`: per-rank figures from a timeline trace
// (engine.logging.trace_path), engine/trace_summary.h.
#ifndef ZEROSHARD_CLI_TRACE_H_
#define ZEROSHARD_CLI_TRACE_H_

#include "cli/subcommand.h"

namespace zeroshard::cli {

extern const Subcommand kTrace;

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_TRACE_H_

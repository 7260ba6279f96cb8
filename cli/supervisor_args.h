// The command line of `zeroshard run` and what it reads of the trainer's:
//   zeroshard run --np N [--hostfile F] [--max-restarts R] [--min-np M] -- TRAINER ARGS...
// Its own flags end at `--`; everything after is the trainer's, less any
// `--resume` (the supervisor adds it when a verified checkpoint exists).
#ifndef ZEROSHARD_CLI_SUPERVISOR_ARGS_H_
#define ZEROSHARD_CLI_SUPERVISOR_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zeroshard::cli {

struct SupervisorArgs {
  int np = 0;
  std::string hostfile;  // empty: the local machine
  int max_restarts = 3;
  int min_np = 0;        // defaults to np: no shrinking
  // The trainer program and its arguments, `--resume` removed.
  std::vector<std::string> trainer;
  // The trainer's --config and --set values, in order.
  std::string config_path;
  std::vector<std::string> overrides;
};

// argv[0] is "run". kInvalidArgument with the message `zeroshard run`
// prints: "--np is required", "--min-np M is above --np N", "no trainer
// program after '--'", unknown or malformed flags.
absl::StatusOr<SupervisorArgs> ParseSupervisorArgs(int argc, char** argv);

// Slots of an Open MPI hostfile ("HOST [slots=N]" lines, '#' comments; a
// host without slots= counts 1). kNotFound when it cannot be read.
absl::StatusOr<int> HostfileSlots(const std::string& path);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_SUPERVISOR_ARGS_H_

// One attempt of a supervised job (docs/resilience_supervisor.md): the
// launcher spawned in a process group of its own, its output copied through
// and kept, and every process below it ended with it. Open MPI puts each
// local rank in a process group of its own, so killing the launcher's group
// alone would leave ranks behind (a stopped one forever): the supervisor is
// the child subreaper of its attempts, and ends every descendant it has.
#ifndef ZEROSHARD_CLI_SUPERVISOR_ATTEMPT_H_
#define ZEROSHARD_CLI_SUPERVISOR_ATTEMPT_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zeroshard::cli {

struct Attempt {
  int exit_code = 0;  // -1 when killed by a signal
  int signal = 0;
  std::string output;  // its last bytes (at least 64 KiB of them)
};

// Runs argv, copying its output to ours. Once failed(output so far) holds,
// the attempt gets `grace_s` to end; then, and in any case once the
// launcher exits, every descendant of this process is killed (SIGKILL) and
// reaped, so nothing of the attempt outlives it. kNotFound when argv[0]
// cannot be started.
absl::StatusOr<Attempt> RunAttempt(const std::vector<std::string>& argv,
                                   const std::function<bool(const std::string&)>& failed, double grace_s = 10);

// The live processes below `root`, by the parent links in /proc.
std::vector<pid_t> Descendants(pid_t root);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_SUPERVISOR_ATTEMPT_H_

#include "cli/supervisor.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "checkpoint/retention.h"
#include "cli/run_config.h"
#include "cli/supervisor_attempt.h"
#include "core/file_io.h"
#include "core/status_macros.h"

namespace zeroshard::cli {
namespace {

// The decimal number at text[pos] (spaces skipped), or -1.
int64_t NumberAt(const std::string& text, size_t pos) {
  while (pos < text.size() && text[pos] == ' ') ++pos;
  size_t end = pos;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  int64_t v = -1;
  if (end == pos || !absl::SimpleAtoi(text.substr(pos, end - pos), &v)) return -1;
  return v;
}

// Where the line holding text[pos] starts.
size_t LineStart(const std::string& text, size_t pos) {
  const size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
  return nl == std::string::npos ? 0 : nl + 1;
}

// engine.checkpoint.dir's newest verified step, or -1 with none.
int64_t ResumeStep(const std::string& root, std::ostream& log) {
  absl::StatusOr<ResumePoint> point = FindResumeCheckpoint(root);
  if (!point.ok()) return -1;
  if (!point->rejected.empty()) log << "zeroshard run: warning: " << point->FallbackWarning() << "\n";
  return point->step;
}

}  // namespace

absl::StatusOr<Layout> LayoutForRanks(int dp, int tp, int pp, int accumulation, int available, int min_np) {
  for (int d = dp; d >= 1; --d) {
    if (dp % d != 0 || d * tp * pp > available) continue;
    if (d * tp * pp < min_np) break;
    return Layout{d, accumulation * (dp / d), d * tp * pp};
  }
  return absl::FailedPreconditionError(absl::StrCat(
      available, " ranks available hold no layout of at least --min-np ", min_np,
      " ranks (dp dividing ", dp, ", tp ", tp, ", pp ", pp, ")"));
}

AttemptReport ScanTrainerOutput(const std::string& output) {
  AttemptReport report;
  // Progress lines: "step    20/50 | loss ...".
  for (size_t at = output.find("step "); at != std::string::npos; at = output.find("step ", at + 1)) {
    if (at > 0 && output[at - 1] != '\n' && output[at - 1] != ' ') continue;
    size_t pos = at + 5;
    while (pos < output.size() && output[pos] == ' ') ++pos;
    const int64_t s = NumberAt(output, pos);
    size_t end = pos;
    while (end < output.size() && std::isdigit(static_cast<unsigned char>(output[end]))) ++end;
    if (s >= 0 && end < output.size() && output[end] == '/') report.last_step = s;
  }
  // The failures the output names; the earliest one is the cause.
  size_t first_at = std::string::npos;
  const auto offer = [&](size_t at, std::string cause) {
    if (at < first_at) {
      first_at = at;
      report.cause = std::move(cause);
    }
  };
  // Open MPI: "process rank R with PID P on node H exited on signal S (Name)."
  const size_t sig = output.find("exited on signal ");
  const size_t rank_at = output.rfind("process rank ", sig);
  if (sig != std::string::npos && rank_at != std::string::npos) {
    const size_t s_at = sig + std::strlen("exited on signal ");
    size_t close = output.find(')', s_at);
    size_t open = output.find('(', s_at);
    std::string by_signal = absl::StrCat("rank ", NumberAt(output, rank_at + std::strlen("process rank ")),
                                         " signal ", NumberAt(output, s_at));
    if (open != std::string::npos && close != std::string::npos && open < close && open < s_at + 6) {
      absl::StrAppend(&by_signal, " ", output.substr(open, close - open + 1));
    }
    offer(rank_at, std::move(by_signal));
  }
  // "Process name: [[J,1],R]" then "Exit code:    C".
  const size_t name_at = output.find("Process name: [[");
  if (name_at != std::string::npos) {
    const size_t comma = output.find("],", name_at);
    const size_t code_at = output.find("Exit code:", name_at);
    if (comma != std::string::npos && code_at != std::string::npos) {
      const int64_t code = NumberAt(output, code_at + std::strlen("Exit code:"));
      offer(name_at, absl::StrCat("rank ", NumberAt(output, comma + 2), " exit code ", code,
                                  code == kPreemptedExitCode ? " (preempted)" : ""));
    }
  }
  // The watchdog's abort (comm/mpi_env.cc: AbortJob): "[rank R] zeroshard:
  // MESSAGE; aborting the job", then MPI_Abort. mpirun prints its banner
  // itself, so it may come before the rank's line: they are one failure,
  // the earlier of the two, named by the line.
  std::map<int64_t, std::pair<size_t, std::string>> watchdog;  // world rank -> (line, cause)
  constexpr char kAborting[] = "; aborting the job";
  for (size_t end = output.find(kAborting); end != std::string::npos; end = output.find(kAborting, end + 1)) {
    const size_t line = LineStart(output, end);
    const absl::string_view text = absl::string_view(output).substr(line, end - line);
    const size_t tag = text.find("] zeroshard: ");
    if (!absl::StartsWith(text, "[rank ") || tag == absl::string_view::npos) continue;
    const int64_t rank = NumberAt(output, line + std::strlen("[rank "));
    watchdog.emplace(rank, std::make_pair(line, absl::StrCat("rank ", rank, " watchdog abort: ",
                                                             text.substr(tag + std::strlen("] zeroshard: ")))));
  }
  for (const auto& [rank, found] : watchdog) offer(found.first, found.second);
  // "MPI_ABORT was invoked on rank R in communicator C\nwith errorcode E."
  const size_t mpi_abort = output.find("MPI_ABORT was invoked on rank ");
  if (mpi_abort != std::string::npos) {
    const int64_t rank = NumberAt(output, mpi_abort + std::strlen("MPI_ABORT was invoked on rank "));
    const size_t code_at = output.find("with errorcode ", mpi_abort);
    const auto by_watchdog = watchdog.find(rank);
    if (by_watchdog != watchdog.end()) {
      offer(mpi_abort, by_watchdog->second.second);
    } else {
      offer(mpi_abort, absl::StrCat("rank ", rank, " MPI_Abort",
                                    code_at == std::string::npos
                                        ? std::string()
                                        : absl::StrCat(" error code ",
                                                       NumberAt(output, code_at + std::strlen("with errorcode ")))));
    }
  }
  // A save that failed (SaveCheckpoint: "...; step N was not saved") ended
  // the attempt: what failed goes with the cause, less the program's name.
  const size_t unsaved = output.find(" was not saved\n");
  if (!report.cause.empty() && unsaved != std::string::npos) {
    const size_t line = LineStart(output, unsaved);
    absl::string_view text = absl::string_view(output).substr(line, unsaved + std::strlen(" was not saved") - line);
    const size_t colon = text.find(": ");
    if (colon != absl::string_view::npos && text.substr(0, colon).find(' ') == absl::string_view::npos) {
      text.remove_prefix(colon + 2);
    }
    absl::StrAppend(&report.cause, " (", text, ")");
  }
  return report;
}

std::string FailureCause(const AttemptReport& report, int exit_code, int signal) {
  if (!report.cause.empty()) return report.cause;
  if (exit_code < 0) return absl::StrCat("launcher signal ", signal);
  return absl::StrCat("exit code ", exit_code, exit_code == kPreemptedExitCode ? " (preempted)" : "");
}

absl::StatusOr<std::vector<std::string>> RemoveAbandonedSaves(const std::string& root) {
  std::vector<std::string> removed;
  if (!IsDirectory(root)) return removed;
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(root));
  for (const std::string& n : names) {
    if (!absl::StartsWith(n, ".tmp_step_")) continue;
    RETURN_IF_ERROR(RemoveTree(JoinPath(root, n)));
    removed.push_back(n);
  }
  return removed;
}

std::vector<std::string> LaunchCommand(const SupervisorArgs& args, int np, int cores, bool root, bool slurm,
                                       const std::vector<std::string>& trainer) {
  std::vector<std::string> argv;
  if (slurm) {
    argv = {"srun", "-n", absl::StrCat(np)};
  } else {
    argv = {"mpirun", "-np", absl::StrCat(np)};
    if (!args.hostfile.empty()) argv.insert(argv.end(), {"--hostfile", args.hostfile});
    if (root) argv.push_back("--allow-run-as-root");
    if (np > cores) argv.push_back("--oversubscribe");
  }
  argv.insert(argv.end(), trainer.begin(), trainer.end());
  return argv;
}

absl::Status Supervise(const SupervisorArgs& args, std::ostream& log) {
  ASSIGN_OR_RETURN(RunConfig config, LoadRunConfig(args.config_path, args.overrides, -1));
  const std::string root = config.engine.checkpoint().dir();
  if (root.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.config_path, ": engine.checkpoint.dir is empty; a supervised run restarts from checkpoints"));
  }
  const ParallelConfig& par = config.engine.parallel();
  const int accumulation = config.engine.gradient_accumulation_steps();
  const int cores = static_cast<int>(std::max<long>(1, ::sysconf(_SC_NPROCESSORS_ONLN)));
  const bool slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  Layout layout{par.dp(), accumulation, args.np};
  int64_t resume = ResumeStep(root, log);
  for (int restarts = 0;; ++restarts) {
    absl::StatusOr<std::vector<std::string>> removed = RemoveAbandonedSaves(root);
    if (!removed.ok()) {
      log << "zeroshard run: warning: " << removed.status().message() << "\n";
    } else if (!removed->empty()) {
      log << "zeroshard run: removed the unfinished save " << absl::StrJoin(*removed, ", ") << " under " << root
          << "\n";
    }
    std::vector<std::string> trainer = args.trainer;
    if (resume >= 0) trainer.push_back("--resume");
    if (layout.dp != par.dp()) {
      // Appended: the last --set of a field wins.
      trainer.insert(trainer.end(), {"--set", absl::StrCat("engine.parallel.dp=", layout.dp), "--set",
                                     absl::StrCat("engine.gradient_accumulation_steps=", layout.accumulation)});
    }
    ASSIGN_OR_RETURN(Attempt attempt,
                     RunAttempt(LaunchCommand(args, layout.world, cores, ::geteuid() == 0, slurm, trainer),
                                [](const std::string& out) { return !ScanTrainerOutput(out).cause.empty(); }));
    if (attempt.exit_code == 0) return absl::OkStatus();
    const AttemptReport report = ScanTrainerOutput(attempt.output);
    const std::string cause = FailureCause(report, attempt.exit_code, attempt.signal);
    const std::string at_step = report.last_step >= 0 ? absl::StrCat(report.last_step) : "unknown";
    if (restarts >= args.max_restarts) {
      return absl::AbortedError(absl::StrCat("giving up after ", restarts, " restarts: last failure ", cause,
                                             " at step ", at_step));
    }
    int available = args.np;
    if (!args.hostfile.empty()) {
      ASSIGN_OR_RETURN(int slots, HostfileSlots(args.hostfile));
      available = std::min(available, slots);
    }
    ASSIGN_OR_RETURN(layout, LayoutForRanks(par.dp(), par.tp(), par.pp(), accumulation, available, args.min_np));
    resume = ResumeStep(root, log);
    log << "zeroshard run: restart " << restarts + 1 << "/" << args.max_restarts << " after " << cause
        << " at step " << at_step << "; resuming from step " << std::max<int64_t>(resume, 0) << " with dp "
        << layout.dp << std::endl;
  }
}

}  // namespace zeroshard::cli

#include "cli/trace.h"

#include <iostream>

#include "core/args.h"
#include "core/file_io.h"
#include "engine/cost_profile.h"
#include "engine/trace_summary.h"

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: zeroshard trace FILE [--write-profile PROFILE]\n"
    "\n"
    "Summarizes a timeline trace written by engine.logging.trace_path, one row\n"
    "per rank: steps and their median time, computation (forward, backward,\n"
    "recompute, optimizer update), each kind of collective with how much of it\n"
    "ran under computation (hidden), and the time spent blocked in waits.\n"
    "--write-profile also writes the trace's measured costs (per-unit forward,\n"
    "backward and recompute medians, the optimizer's seconds per element, the\n"
    "links fitted to its collectives) as a text cost profile, for\n"
    "zeroshard schedule --profile (docs/simulator.md).\n"
    "Exits 2 when FILE is missing or not such a trace, or the profile cannot be\n"
    "made or written.\n";

int Run(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argc, argv, 1, {{"help", false}, {"write-profile"}});
  if (!args.ok()) {
    std::cerr << "zeroshard trace: " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  if (args->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (args->positional.size() != 1) {
    std::cerr << "zeroshard trace: expected exactly one trace file, got " << args->positional.size() << "\n" << kUsage;
    return 2;
  }
  const std::string& path = args->positional[0];
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    std::cerr << "zeroshard trace: " << text.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::vector<RankTraceSummary>> summary = SummarizeTrace(*text, path);
  if (!summary.ok()) {
    std::cerr << "zeroshard trace: " << summary.status().message() << "\n";
    return 2;
  }
  std::cout << FormatTraceSummary(*summary);
  if (!args->Has("write-profile")) return 0;
  const std::string profile_path = args->Get("write-profile", "");
  absl::StatusOr<CostProfile> profile = CostProfileFromTrace(*text, path);
  absl::Status written = profile.ok() ? WriteCostProfile(*profile, profile_path) : profile.status();
  if (!written.ok()) {
    std::cerr << "zeroshard trace: --write-profile " << profile_path << ": " << written.message() << "\n";
    return 2;
  }
  std::cout << "\ncost profile: " << profile_path << " (" << profile->units_size() << " units, "
            << profile->links_size() << " links, step " << profile->measured_step_seconds() * 1000 << " ms)\n";
  return 0;
}

}  // namespace

const Subcommand kTrace = {"trace", "summarize a timeline trace: computation, hidden communication, waits per rank",
                           kUsage, Run};

}  // namespace zeroshard::cli

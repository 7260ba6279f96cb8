#include "cli/trace.h"

#include <iostream>

#include "core/args.h"
#include "core/file_io.h"
#include "engine/trace_summary.h"

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: zeroshard trace FILE\n"
    "\n"
    "Summarizes a timeline trace written by engine.logging.trace_path, one row\n"
    "per rank: steps and their median time, computation (forward, backward,\n"
    "recompute, optimizer update), each kind of collective with how much of it\n"
    "ran under computation (hidden), and the time spent blocked in waits.\n"
    "Exits 2 when FILE is missing or not such a trace.\n";

int Run(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argc, argv, 1, {{"help", false}});
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
  return 0;
}

}  // namespace

const Subcommand kTrace = {"trace", "summarize a timeline trace: computation, hidden communication, waits per rank",
                           kUsage, Run};

}  // namespace zeroshard::cli

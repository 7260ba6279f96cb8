// The `zeroshard` command: dispatches to subcommands.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/check_config.h"
#include "cli/comm_bench.h"
#include "cli/ckpt.h"
#include "cli/run.h"
#include "cli/schedule.h"
#include "cli/subcommand.h"
#include "cli/trace.h"

namespace zeroshard::cli {
namespace {

const std::vector<const Subcommand*>& Subcommands() {
  static const std::vector<const Subcommand*> all = {
      &kCheckConfig,
      &kCommBench,
      &kCkpt,
      &kRun,
      &kSchedule,
      &kTrace,
  };
  return all;
}

void PrintHelp(std::ostream& out) {
  out << "usage: zeroshard SUBCOMMAND [ARGS...]\n\nsubcommands:\n";
  for (const Subcommand* s : Subcommands()) {
    out << "  " << s->name << std::string(16 - std::min<size_t>(15, std::strlen(s->name)), ' ') << s->summary << "\n";
  }
  out << "\n'zeroshard help SUBCOMMAND' shows a subcommand's usage.\n";
}

const Subcommand* Find(const std::string& name) {
  for (const Subcommand* s : Subcommands()) {
    if (name == s->name) return s;
  }
  return nullptr;
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintHelp(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  if (name == "help") {
    if (argc < 3) {
      PrintHelp(std::cout);
      return 0;
    }
    const Subcommand* s = Find(argv[2]);
    if (s == nullptr) {
      std::cerr << "zeroshard: no subcommand '" << argv[2] << "'\n";
      PrintHelp(std::cerr);
      return 2;
    }
    std::cout << s->usage;
    return 0;
  }
  const Subcommand* s = Find(name);
  if (s == nullptr) {
    std::cerr << "zeroshard: no subcommand '" << name << "'\n";
    PrintHelp(std::cerr);
    return 2;
  }
  return s->run(argc - 1, argv + 1);
}

}  // namespace
}  // namespace zeroshard::cli

int main(int argc, char** argv) { return zeroshard::cli::Main(argc, argv); }

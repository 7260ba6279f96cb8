#include "cli/supervisor_args.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/args.h"
#include "core/file_io.h"
#include "core/status_macros.h"

namespace zeroshard::cli {
namespace {

absl::StatusOr<int> PositiveInt(const ParsedArgs& args, const std::string& name, int fallback, int minimum) {
  ASSIGN_OR_RETURN(long long v, args.GetInt(name, fallback));
  if (v < minimum || v > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected an integer >= ", minimum, ", got '", args.Get(name), "'"));
  }
  return static_cast<int>(v);
}

}  // namespace

absl::StatusOr<SupervisorArgs> ParseSupervisorArgs(int argc, char** argv) {
  int dashes = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      dashes = i;
      break;
    }
  }
  ASSIGN_OR_RETURN(ParsedArgs args, ParseArgs(dashes, argv, 1,
                                              {{"np"}, {"hostfile"}, {"max-restarts"}, {"min-np"}}));
  if (!args.positional.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional[0], "' before '--'"));
  }
  if (!args.Has("np")) return absl::InvalidArgumentError("--np is required");
  SupervisorArgs out;
  ASSIGN_OR_RETURN(out.np, PositiveInt(args, "np", 0, 1));
  ASSIGN_OR_RETURN(out.max_restarts, PositiveInt(args, "max-restarts", 3, 0));
  ASSIGN_OR_RETURN(out.min_np, PositiveInt(args, "min-np", out.np, 1));
  if (out.min_np > out.np) {
    return absl::InvalidArgumentError(absl::StrCat("--min-np ", out.min_np, " is above --np ", out.np));
  }
  out.hostfile = args.Get("hostfile");
  if (dashes + 1 >= argc) return absl::InvalidArgumentError("no trainer program after '--'");
  for (int i = dashes + 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--resume") continue;
    out.trainer.push_back(a);
    if (i == dashes + 1) continue;
    for (const char* flag : {"--config", "--set"}) {
      std::string value;
      if (a == flag && i + 1 < argc) {
        value = argv[i + 1];
      } else if (absl::StartsWith(a, absl::StrCat(flag, "="))) {
        value = a.substr(std::strlen(flag) + 1);
      } else {
        continue;
      }
      if (std::strcmp(flag, "--config") == 0) {
        out.config_path = value;
      } else {
        out.overrides.push_back(value);
      }
    }
  }
  if (out.config_path.empty()) {
    return absl::InvalidArgumentError("the trainer's arguments have no --config: cannot find engine.checkpoint.dir");
  }
  return out;
}

absl::StatusOr<int> HostfileSlots(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  int slots = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> words = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.empty()) continue;
    int host_slots = 1;
    for (size_t w = 1; w < words.size(); ++w) {
      absl::string_view v = words[w];
      if (absl::ConsumePrefix(&v, "slots=") && !absl::SimpleAtoi(v, &host_slots)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": '", words[w], "' is not slots=<integer>"));
      }
    }
    slots += host_slots;
  }
  return slots;
}

}  // namespace zeroshard::cli

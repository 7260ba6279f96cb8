#include "core/args.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace zeroshard {

std::string ParsedArgs::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> ParsedArgs::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<long long> ParsedArgs::GetInt(const std::string& name, long long fallback) const {
  if (!Has(name)) return fallback;
  long long v;
  if (!absl::SimpleAtoi(Get(name), &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", Get(name), "' is not an integer"));
  }
  return v;
}

absl::StatusOr<ParsedArgs> ParseArgs(int argc, char** argv, int first, const std::vector<FlagSpec>& specs) {
  ParsedArgs out;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (!absl::StartsWith(arg, "--") || arg == "--") {
      out.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (spec->takes_value && !has_value) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    } else if (!spec->takes_value) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      value = "true";
    }
    if (out.Has(name) && !spec->repeatable) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " given more than once"));
    }
    out.Add(name, value);
  }
  return out;
}

}  // namespace zeroshard

// Command-line parsing for `zeroshard` subcommands and the trainers: positional arguments
// plus declared flags (--name=value, --name value, or bare --name for
// booleans). Unknown flags are errors, so a typo never silently does nothing.
#ifndef ZEROSHARD_CORE_ARGS_H_
#define ZEROSHARD_CORE_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zeroshard {

struct FlagSpec {
  std::string name;        // without dashes, e.g. "world-size"
  bool takes_value = true;  // false: a boolean switch
  bool repeatable = false;
};

class ParsedArgs {
 public:
  std::vector<std::string> positional;

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // The last value given, or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // Every value of a repeatable flag, in order.
  std::vector<std::string> GetAll(const std::string& name) const;
  // The flag as an integer; kInvalidArgument naming the flag and the text.
  absl::StatusOr<long long> GetInt(const std::string& name, long long fallback) const;

  void Add(const std::string& name, std::string value) { values_[name].push_back(std::move(value)); }

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

// Parses argv[first..argc). kInvalidArgument names an unknown flag, a
// missing value, or a non-repeatable flag given twice.
absl::StatusOr<ParsedArgs> ParseArgs(int argc, char** argv, int first, const std::vector<FlagSpec>& specs);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_ARGS_H_

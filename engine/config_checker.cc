#include "engine/config_checker.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

void ConfigChecker::Range(const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) Add(absl::StrCat(field, ": ", v, " is out of range [", lo, ", ", hi, "]"));
}

void ConfigChecker::AtLeast(const std::string& field, double v, double lo) {
  if (!(v >= lo)) Add(absl::StrCat(field, ": ", v, " is out of range; expected >= ", lo));
}

void ConfigChecker::Positive(const std::string& field, double v) {
  if (!(v > 0)) Add(absl::StrCat(field, ": ", v, " is out of range; expected > 0"));
}

void ConfigChecker::HalfOpen01(const std::string& field, double v) {
  if (!(v >= 0 && v < 1)) Add(absl::StrCat(field, ": ", v, " is out of range [0, 1)"));
}


}  // namespace zeroshard

// ConfigChecker: collects a config's validation errors in the one format
// every rule uses: the field path first, then the bad and the expected
// value, e.g. "engine.zero.stage: 4 is out of range [0, 3]".
#ifndef ZEROSHARD_ENGINE_CONFIG_CHECKER_H_
#define ZEROSHARD_ENGINE_CONFIG_CHECKER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace zeroshard {

class ConfigChecker {
 public:
  // lo <= v <= hi.
  void Range(const std::string& field, int64_t v, int64_t lo, int64_t hi);
  // v >= lo (NaN fails).
  void AtLeast(const std::string& field, double v, double lo);
  // v > 0 (NaN fails).
  void Positive(const std::string& field, double v);
  // 0 <= v < 1.
  void HalfOpen01(const std::string& field, double v);
  void Add(std::string error) { errors_.push_back(std::move(error)); }

  const std::vector<std::string>& errors() const { return errors_; }
  std::vector<std::string> Take() { return std::move(errors_); }

 private:
  std::vector<std::string> errors_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_CONFIG_CHECKER_H_

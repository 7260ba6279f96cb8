// A model: the ordered list of units the engine walks forward and backward.
#ifndef ZEROSHARD_NN_MODEL_H_
#define ZEROSHARD_NN_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nn/unit.h"

namespace zeroshard {

// Where a parameter lives: units[unit]->params()[param].
struct ParamLocation {
  int unit = -1;
  int param = -1;
};

class Model {
 public:
  // In forward order. units.front() reads tokens; units.back() returns the loss.
  std::vector<std::unique_ptr<Unit>> units;

  // Elements over every owned parameter (a tied tensor counts once).
  int64_t num_params() const;

  // The unit and index owning `name`; kNotFound naming it otherwise.
  absl::StatusOr<ParamLocation> FindParam(absl::string_view name) const;

  // Every borrowed name refers to a parameter of another unit, owned names
  // are unique, and shapes are positive. kInvalidArgument naming the first
  // violation. BuildGpt2 returns models that pass it.
  absl::Status Validate() const;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_MODEL_H_

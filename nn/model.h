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
  // In forward order. units.back() returns the loss.
  std::vector<std::unique_ptr<Unit>> units;

  // Tensors a full-model safetensors file may hold that are not parameters
  // of this model and are skipped when importing it (GPT-2: Hugging Face's
  // "lm_head.weight" and attention-mask buffers). A pattern starting with
  // '*' matches names ending with the rest; otherwise names equal to it.
  std::vector<std::string> ignored_import_tensors;
  // Whether `name` matches ignored_import_tensors.
  bool IgnoresImportTensor(absl::string_view name) const;

  // Elements over every owned parameter (a tied tensor counts once).
  // Padding included (the elements the engine stores).
  int64_t num_params() const;
  // Without padding (ParamSpec::logical_shape): what users and Hugging Face
  // count. Equal to num_params() when nothing is padded.
  int64_t num_logical_params() const;

  // The unit and index owning `name`; kNotFound naming it otherwise.
  absl::StatusOr<ParamLocation> FindParam(absl::string_view name) const;

  // Every borrowed name refers to a parameter of another unit, unit and
  // parameter names are unique, shapes are positive, a unit's parameters
  // are all trainable or all frozen, optimizer multipliers are >= 0 (lr > 0),
  // logical (unpadded) shapes fit their shapes, and every partition divides
  // its dimension over `tp_size` ranks.
  // kInvalidArgument naming the first violation. BuildGpt2 returns models
  // that pass it.
  absl::Status Validate(int tp_size = 1) const;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_MODEL_H_

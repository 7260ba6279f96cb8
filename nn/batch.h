// Batch: one micro-batch as named tensors (docs/model.md).
//
// Tensors may have any dtype and shape; every tensor has the same number of
// rows on dimension 0 (examples, sequences). The views do not own memory:
// the caller keeps the tensors alive while the engine uses the batch.
#ifndef ZEROSHARD_NN_BATCH_H_
#define ZEROSHARD_NN_BATCH_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/buffer.h"

namespace zeroshard {

struct NamedTensor {
  std::string name;
  TensorView view;
};

class Batch {
 public:
  Batch() = default;
  Batch(std::initializer_list<NamedTensor> tensors) : tensors_(tensors) {}

  void Add(std::string name, TensorView view) { tensors_.push_back({std::move(name), std::move(view)}); }
  const std::vector<NamedTensor>& tensors() const { return tensors_; }
  bool empty() const { return tensors_.empty(); }

  // The tensor called `name`; kInvalidArgument naming it and listing the
  // batch's tensors when there is none.
  absl::StatusOr<TensorView> Get(absl::string_view name) const;
  // nullptr when absent.
  const TensorView* Find(absl::string_view name) const;

  // Dimension 0 of the first tensor (0 for an empty batch or a scalar).
  int64_t rows() const;

  // OK when the batch has a tensor, every tensor has data, at least one
  // dimension and the same rows, and names are unique; kInvalidArgument
  // naming the first offender otherwise.
  absl::Status Validate() const;

  // "inputs:i32[4, 64] targets:i32[4, 64]" (names, dtypes, shapes, devices
  // other than cpu), what ranks compare before a step.
  std::string Signature() const;

 private:
  std::vector<NamedTensor> tensors_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_BATCH_H_

#include "nn/batch.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

const TensorView* Batch::Find(absl::string_view name) const {
  for (const NamedTensor& t : tensors_) {
    if (t.name == name) return &t.view;
  }
  return nullptr;
}

absl::StatusOr<TensorView> Batch::Get(absl::string_view name) const {
  if (const TensorView* v = Find(name)) return *v;
  std::vector<std::string> names;
  for (const NamedTensor& t : tensors_) names.push_back(t.name);
  return absl::InvalidArgumentError(absl::StrCat("the batch has no tensor '", name, "' (it has: ",
                                                 names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
}

int64_t Batch::rows() const {
  if (tensors_.empty() || tensors_[0].view.shape.empty()) return 0;
  return tensors_[0].view.shape[0];
}

absl::Status Batch::Validate() const {
  if (tensors_.empty()) return absl::InvalidArgumentError("the batch has no tensors");
  std::set<std::string> seen;
  const int64_t r = rows();
  for (const NamedTensor& t : tensors_) {
    if (!seen.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("the batch has two tensors named '", t.name, "'"));
    }
    if (t.view.shape.empty() || t.view.shape[0] != r || r < 1) {
      return absl::InvalidArgumentError(absl::StrCat("batch tensor '", t.name, "' is ", t.view.DebugString(),
                                                     ", expected ", r < 1 ? "at least 1" : absl::StrCat(r),
                                                     " rows on dimension 0 like '", tensors_[0].name, "'"));
    }
    for (int64_t d : t.view.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("batch tensor '", t.name, "' has shape ", t.view.DebugString(), " with a negative size"));
      }
    }
    if (t.view.data == nullptr && t.view.numel() > 0) {
      return absl::InvalidArgumentError(absl::StrCat("batch tensor '", t.name, "' has no data"));
    }
  }
  return absl::OkStatus();
}

std::string Batch::Signature() const {
  std::vector<std::string> parts;
  for (const NamedTensor& t : tensors_) {
    std::string part = absl::StrCat(t.name, ":", t.view.DebugString());
    if (t.view.device != Device::kCpu) absl::StrAppend(&part, "@", DeviceName(t.view.device));
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace zeroshard

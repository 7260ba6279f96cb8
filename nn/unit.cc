#include "nn/unit.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/device.h"
#include "core/hash.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

}  // namespace

uint64_t UnitRngKey(uint64_t seed, int64_t step, int micro_batch, int unit) {
  uint64_t h = SplitMix64(seed);
  h = SplitMix64(h ^ static_cast<uint64_t>(step));
  h = SplitMix64(h ^ static_cast<uint64_t>(static_cast<int64_t>(micro_batch)));
  return SplitMix64(h ^ static_cast<uint64_t>(static_cast<int64_t>(unit)));
}

void ActivationPack::Add(Buffer buffer, std::vector<int64_t> shape) {
  buffers_.push_back(std::move(buffer));
  shapes_.push_back(std::move(shape));
}

std::vector<TensorView> ActivationPack::views() const {
  std::vector<TensorView> v;
  v.reserve(buffers_.size());
  for (size_t i = 0; i < buffers_.size(); ++i) v.push_back(ViewOf(buffers_[i], shapes_[i]));
  return v;
}

int64_t ActivationPack::bytes() const {
  int64_t n = 0;
  for (const Buffer& b : buffers_) n += b.bytes();
  return n;
}

void ActivationPack::Clear() {
  buffers_.clear();
  shapes_.clear();
}

absl::StatusOr<LossTerms> ResolveLossTerms(const LossTerms& terms) {
  if (terms.device_sums == nullptr) return terms;
  const Buffer& b = *terms.device_sums;
  if (b.dtype() != DType::kF32 || b.numel() < 2 || b.numel() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("LossTerms::device_sums holds ", b.numel(), " ", DTypeName(b.dtype()),
                                                   " values, expected an even count >= 2 of f32"));
  }
  std::vector<float> host(static_cast<size_t>(b.numel()));
  RETURN_IF_ERROR(DeviceCopy(host.data(), Device::kCpu, b.data(), b.device(), host.size() * sizeof(float)));
  LossTerms out;
  out.loss = WeightedSum{host[0], host[1]};
  for (size_t i = 2; i < host.size(); i += 2) out.metrics.push_back(WeightedSum{host[i], host[i + 1]});
  return out;
}

absl::Status Unit::BackwardInput(const UnitContext&, absl::Span<const TensorView>, const Batch&,
                                 const SavedActivations&, absl::Span<const TensorView>, ActivationPack*,
                                 std::unique_ptr<SavedActivations>*) const {
  return absl::UnimplementedError(absl::StrCat("unit '", name(), "' does not split its backward (BackwardInput)"));
}

absl::Status Unit::BackwardWeight(const UnitContext&, absl::Span<const TensorView>, const Batch&,
                                  const SavedActivations&, const SavedActivations&) const {
  return absl::UnimplementedError(absl::StrCat("unit '", name(), "' does not split its backward (BackwardWeight)"));
}

}  // namespace zeroshard

#include "nn/tensor_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

absl::Status CheckTensor(const TensorView& t, absl::string_view what, DType dtype,
                         const std::vector<int64_t>& shape, Device device) {
  if (t.dtype != dtype || t.shape != shape || t.device != device || (t.data == nullptr && t.numel() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": got ", t.DebugString(), " on ", DeviceName(t.device),
                                                   t.data == nullptr ? " (null)" : "", ", expected ",
                                                   DTypeName(dtype), "[", absl::StrJoin(shape, ", "), "] on ",
                                                   DeviceName(device)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Buffer> AllocateOnDevice(const ComputeContext& ctx, MemoryCategory category, DType dtype,
                                        int64_t numel) {
  return Buffer::AllocateZeroed(ctx.tracker, category, ctx.kernels.device, dtype, numel);
}

absl::StatusOr<Buffer> AllocateOutputOnDevice(const ComputeContext& ctx, MemoryCategory category, DType dtype,
                                              int64_t numel) {
  return Buffer::Allocate(ctx.tracker, category, ctx.kernels.device, dtype, numel);
}

TensorView View(Buffer& buf, std::vector<int64_t> shape) { return ViewOf(buf, std::move(shape)); }

TensorView View(const Buffer& buf, std::vector<int64_t> shape) {
  TensorView v;
  v.data = const_cast<void*>(buf.data());
  v.dtype = buf.dtype();
  v.shape = std::move(shape);
  v.device = buf.device();
  return v;
}

}  // namespace zeroshard

#include "nn/tensor_checks.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/device.h"

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

namespace {
std::atomic<int> poison_outputs{-1};  // -1: not yet read from the environment
}  // namespace

bool PoisonOutputs() {
  int on = poison_outputs.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* env = std::getenv("ZEROSHARD_POISON_OUTPUTS");
    on = env != nullptr && std::strcmp(env, "1") == 0 ? 1 : 0;
    poison_outputs.store(on, std::memory_order_relaxed);
  }
  return on == 1;
}

void SetPoisonOutputs(bool on) { poison_outputs.store(on ? 1 : 0, std::memory_order_relaxed); }

absl::StatusOr<Buffer> AllocateOutputOnDevice(const ComputeContext& ctx, MemoryCategory category, DType dtype,
                                              int64_t numel) {
  absl::StatusOr<Buffer> buf = Buffer::Allocate(ctx.tracker, category, ctx.kernels.device, dtype, numel);
  if (buf.ok() && PoisonOutputs()) {
    absl::Status s = DeviceMemset(buf->data(), ctx.kernels.device, 0xFF, static_cast<size_t>(buf->bytes()));
    if (!s.ok()) return s;
  }
  return buf;
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

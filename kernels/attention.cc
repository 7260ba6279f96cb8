#include "kernels/attention.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/attention_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {
namespace {

absl::Status CheckAttention(const char* kernel, int64_t batch, int64_t seq_len, int64_t channels, int64_t num_heads,
                            DType dtype) {
  RETURN_IF_ERROR(CheckDims(
      kernel, {{"batch", batch}, {"seq_len", seq_len}, {"channels", channels}, {"num_heads", num_heads}}));
  RETURN_IF_ERROR(CheckFitsInt32(kernel, {{"seq_len", seq_len}, {"3 * channels", 3 * channels}}));
  if (channels % num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": channels = ", channels,
                                                   " is not a multiple of num_heads = ", num_heads));
  }
  return CheckComputeDType(kernel, dtype);
}

}  // namespace

absl::Status AttentionForward(const KernelContext& ctx, void* out, float* lse, const void* qkv, int64_t batch,
                              int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype) {
  RETURN_IF_ERROR(CheckAttention("AttentionForward", batch, seq_len, channels, num_heads, dtype));
  RETURN_IF_ERROR(CheckNotNull("AttentionForward", {{"out", out}, {"lse", lse}, {"qkv", qkv}}));
  ZS_KERNEL_DISPATCH(
      "AttentionForward", ctx,
      cpu::AttentionForward(LoopThreads(ctx), out, lse, qkv, batch, seq_len, channels, num_heads, dtype),
      cuda::AttentionForward(ctx, out, lse, qkv, batch, seq_len, channels, num_heads, dtype));
}

absl::Status AttentionBackward(const KernelContext& ctx, void* dqkv, float* scratch, const void* dout,
                               const void* qkv, const void* out, const float* lse, int64_t batch, int64_t seq_len,
                               int64_t channels, int64_t num_heads, DType dtype) {
  RETURN_IF_ERROR(CheckAttention("AttentionBackward", batch, seq_len, channels, num_heads, dtype));
  RETURN_IF_ERROR(CheckNotNull("AttentionBackward", {{"dqkv", dqkv},
                                                     {"scratch", scratch},
                                                     {"dout", dout},
                                                     {"qkv", qkv},
                                                     {"out", out},
                                                     {"lse", lse}}));
  ZS_KERNEL_DISPATCH("AttentionBackward", ctx,
                     cpu::AttentionBackward(LoopThreads(ctx), dqkv, dout, qkv, lse, batch, seq_len, channels,
                                            num_heads, dtype),
                     cuda::AttentionBackward(ctx, dqkv, scratch, dout, qkv, out, lse, batch, seq_len, channels,
                                             num_heads, dtype));
}

}  // namespace zeroshard::kernels

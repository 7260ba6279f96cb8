#include "kernels/attention.h"

namespace zeroshard::kernels {

absl::Status AttentionForward(const KernelContext& ctx, void* out, float* att, const void* qkv, int64_t batch,
                              int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype) {
  return absl::UnimplementedError("AttentionForward is not implemented yet");
}

absl::Status AttentionBackward(const KernelContext& ctx, void* dqkv, float* scratch, const void* dout,
                               const void* qkv, const float* att, int64_t batch, int64_t seq_len, int64_t channels,
                               int64_t num_heads, DType dtype) {
  return absl::UnimplementedError("AttentionBackward is not implemented yet");
}

}  // namespace zeroshard::kernels

#include "kernels/embedding.h"

namespace zeroshard::kernels {

absl::Status EmbeddingForward(const KernelContext& ctx, void* out, const int32_t* tokens, const void* wte,
                              const void* wpe, int64_t batch, int64_t seq_len, int64_t channels, int64_t vocab,
                              DType dtype) {
  return absl::UnimplementedError("EmbeddingForward is not implemented yet");
}

absl::Status EmbeddingBackward(const KernelContext& ctx, void* dwte, void* dwpe, const void* dout,
                               const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                               int64_t vocab, DType dtype) {
  return absl::UnimplementedError("EmbeddingBackward is not implemented yet");
}

}  // namespace zeroshard::kernels

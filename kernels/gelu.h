// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))).
// Element-wise over n elements; thread-count independent on CPU.
#ifndef ZEROSHARD_KERNELS_GELU_H_
#define ZEROSHARD_KERNELS_GELU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (n) = gelu(inp). out may alias inp.
absl::Status GeluForward(const KernelContext& ctx, void* out, const void* inp, int64_t n, DType dtype);

// dinp (n) = gelu'(inp) * dout, WRITTEN. dinp may alias dout.
absl::Status GeluBackward(const KernelContext& ctx, void* dinp, const void* inp, const void* dout, int64_t n,
                          DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_GELU_H_

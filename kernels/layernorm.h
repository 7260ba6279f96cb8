// LayerNorm over the last dimension.
//
// N rows (B*T), C channels. inp/out/weight/bias/dinp/dout share dtype;
// mean and rstd are f32 (N). Thread-count independent on CPU.
#ifndef ZEROSHARD_KERNELS_LAYERNORM_H_
#define ZEROSHARD_KERNELS_LAYERNORM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (N,C) = (inp - mean) * rstd * weight + bias,
// mean = mean_c(inp), rstd = 1/sqrt(var_c(inp) + eps) (biased variance),
// both saved for backward. GPT-2 uses eps = 1e-5.
absl::Status LayerNormForward(const KernelContext& ctx, void* out, float* mean, float* rstd, const void* inp,
                              const void* weight, const void* bias, int64_t rows, int64_t channels, float eps,
                              DType dtype);

// dinp (N,C) WRITTEN; dweight (C) and dbias (C) ACCUMULATED (+=).
// dinp must not alias dout or inp.
// Either part may be skipped: dinp == nullptr computes the parameter
// gradients only, dweight == dbias == nullptr the input gradient only (then
// weight may be null too: only dinp reads it). A computed part is bitwise
// what the full call gives. kInvalidArgument when only one of dweight and
// dbias is null, or when nothing is left to compute.
absl::Status LayerNormBackward(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                               const void* inp, const void* weight, const float* mean, const float* rstd,
                               int64_t rows, int64_t channels, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_LAYERNORM_H_

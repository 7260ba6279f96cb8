// Linear layer y = x · W + b with W stored [in, out] (Hugging Face Conv1D).
//
// Shapes: N = rows (B*T), C = in_features, OC = out_features.
// All tensors share `dtype` (f32, bf16 or f16); f32 accumulation.
#ifndef ZEROSHARD_KERNELS_LINEAR_H_
#define ZEROSHARD_KERNELS_LINEAR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (N,OC) = inp (N,C) · weight (C,OC) + bias (OC). bias may be null.
// out is written (never read) and must not alias inp. CUDA: with a bias,
// one cuBLASLt matmul with the bias epilogue (f32/bf16, where an algorithm
// is found), else cuBLAS GEMM and a bias pass.
absl::Status LinearForward(const KernelContext& ctx, void* out, const void* inp, const void* weight,
                           const void* bias, int64_t rows, int64_t in_features, int64_t out_features, DType dtype);

// pre (N,OC) = inp · weight + bias and out (N,OC) = gelu(pre), GELU's tanh
// approximation (kernels/gelu.h); bias may be null. pre is what
// GeluBackward needs. Both are written (never read); neither may alias the
// other or inp. CPU: bitwise LinearForward into pre, then GeluForward. CUDA:
// one cuBLASLt matmul with the GELU epilogue where cuBLASLt takes the case
// (f32/bf16, OC a multiple of 8, an algorithm found), else the two calls;
// the fused results match those to rounding, not bitwise.
absl::Status LinearGeluForward(const KernelContext& ctx, void* out, void* pre, const void* inp,
                               const void* weight, const void* bias, int64_t rows, int64_t in_features,
                               int64_t out_features, DType dtype);

// dinp (N,C)     = dout · weight^T   WRITTEN (skipped when dinp is null)
// dweight (C,OC) += inp^T · dout     ACCUMULATED (skipped when dweight is null)
// dbias (OC)     += sum over rows of dout   ACCUMULATED (skipped when null)
// dout is (N,OC) and always required; weight only when dinp is set, inp only
// when dweight is set. Each part is computed by the same calls whatever else
// is skipped, so split calls give bitwise the full call's results.
// kInvalidArgument when dinp, dweight and dbias are all null.
absl::Status LinearBackward(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                            const void* inp, const void* weight, int64_t rows, int64_t in_features,
                            int64_t out_features, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_LINEAR_H_

// CUDA implementations of the kernels in kernels/*.h (kernel launchers).
// The public entry points validate arguments and call these only for
// ctx.device == kCuda; every pointer here is device memory except the
// host results named in the public headers. Each launcher enqueues on
// ctx.cuda_stream and checks the launch with cudaGetLastError.
//
// Defined by the .cu files of //kernels/cuda:cuda_kernels, which exist only
// when the build has CUDA (ZEROSHARD_HAS_CUDA).
#ifndef ZEROSHARD_KERNELS_CUDA_LAUNCHERS_H_
#define ZEROSHARD_KERNELS_CUDA_LAUNCHERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"
#include "kernels/transpose.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cuda {

// gemm.cu (cuBLAS)
absl::Status Gemm(const KernelContext& ctx, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
                  int64_t ldc, DType dtype);
absl::Status BiasAdd(const KernelContext& ctx, void* out, const void* bias, int64_t rows, int64_t cols, DType dtype);
absl::Status BiasGrad(const KernelContext& ctx, void* dbias, const void* dout, int64_t rows, int64_t cols,
                      DType dtype);

// linear_lt.cu (cuBLASLt). One cublasLtMatmul of out (N,OC) = inp (N,C) ·
// weight (C,OC) with a fused epilogue: + bias when bias is set; with pre set,
// also GELU (tanh approximation): pre = inp·weight (+ bias), out = gelu(pre).
// f32 accumulation, no TF32. *fused = false with nothing enqueued when the
// case is not one cuBLASLt takes here: no ctx.cublaslt_handle, dtype f16,
// pre set with OC not a multiple of 8 (the aux matrix's ld rule), or no
// algorithm from the heuristic; the caller then runs the unfused kernels.
// Any other cuBLASLt failure is an error naming the call.
absl::Status LinearLt(const KernelContext& ctx, void* out, void* pre, const void* inp, const void* weight,
                      const void* bias, int64_t rows, int64_t in_features, int64_t out_features, DType dtype,
                      bool* fused);

// embedding.cu
absl::Status EmbeddingForward(const KernelContext& ctx, void* out, const int32_t* tokens, const void* wte,
                              const void* wpe, int64_t batch, int64_t seq_len, int64_t channels, DType dtype);
absl::Status EmbeddingBackward(const KernelContext& ctx, void* dwte, void* dwpe, const void* dout,
                               const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                               int64_t vocab, DType dtype);

// layernorm.cu
absl::Status LayerNormForward(const KernelContext& ctx, void* out, float* mean, float* rstd, const void* inp,
                              const void* weight, const void* bias, int64_t rows, int64_t channels, float eps,
                              DType dtype);
absl::Status LayerNormBackward(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                               const void* inp, const void* weight, const float* mean, const float* rstd,
                               int64_t rows, int64_t channels, DType dtype);

// elementwise.cu
absl::Status GeluForward(const KernelContext& ctx, void* out, const void* inp, int64_t n, DType dtype);
absl::Status GeluBackward(const KernelContext& ctx, void* dinp, const void* inp, const void* dout, int64_t n,
                          DType dtype);
absl::Status ResidualForward(const KernelContext& ctx, void* out, const void* a, const void* b, int64_t n,
                             DType dtype);
absl::Status Cast(const KernelContext& ctx, void* out, DType out_dtype, const void* in, DType in_dtype, int64_t n);
absl::Status AccumulateInto(const KernelContext& ctx, float* dst, const void* src, DType src_dtype, int64_t n);
absl::Status ScaleInPlace(const KernelContext& ctx, void* x, int64_t n, DType dtype, float scale,
                          bool* found_nonfinite);
absl::Status SumOfSquares(const KernelContext& ctx, const void* x, int64_t n, DType dtype, double* result);
// results[i] = SumOfSquares of (xs[i], ns[i]) for i < count; one read-back.
absl::Status SumOfSquaresMany(const KernelContext& ctx, const void* const* xs, const int64_t* ns, size_t count,
                              DType dtype, double* results);

// attention.cu
absl::Status AttentionForward(const KernelContext& ctx, void* out, float* lse, const void* qkv, int64_t batch,
                              int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype);
absl::Status AttentionBackward(const KernelContext& ctx, void* dqkv, float* scratch, const void* dout,
                               const void* qkv, const void* out, const float* lse, int64_t batch, int64_t seq_len,
                               int64_t channels, int64_t num_heads, DType dtype);

// cross_entropy.cu
absl::Status CrossEntropyForward(const KernelContext& ctx, float* losses, float* lse, float* loss_sums,
                                 const void* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                 DType dtype);
absl::Status CrossEntropyBackward(const KernelContext& ctx, void* dlogits, const void* logits, const float* lse,
                                  const int32_t* targets, float dloss, int64_t rows, int64_t vocab, DType dtype);
// sums[0] = the sum of the losses of rows whose target is >= 0, sums[1] =
// their count; one block in a fixed order (f64). Also used by
// vocab_parallel.cu. `what` names the launch in errors.
absl::Status LossSums(const KernelContext& ctx, float* sums, const float* losses, const int32_t* targets,
                      int64_t rows, const char* what);

// optimizer.cu
absl::Status AdamWUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg,
                         float* exp_avg_sq, int64_t n, const AdamWScalars& s);
absl::Status SgdUpdate(const KernelContext& ctx, float* param, const float* grad, float* momentum_buf, int64_t n,
                       float lr, float momentum, float dampening, float weight_decay, bool nesterov,
                       bool first_step);

}  // namespace zeroshard::kernels::cuda

#endif  // ZEROSHARD_KERNELS_CUDA_LAUNCHERS_H_

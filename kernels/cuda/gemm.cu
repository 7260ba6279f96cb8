// cuBLAS GEMM (row-major via the transposed column-major product) and the
// bias kernels.
#include <cublas_v2.h>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/float_types.h"

namespace zeroshard::kernels::cuda {
namespace {

cudaDataType_t CudaType(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

absl::Status CublasStatus(const char* what, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusName(s), ": ", cublasGetStatusString(s)));
}

template <typename T>
__global__ void BiasAddKernel(T* out, const T* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = Store<T>(Load(out[i]) + Load(bias[i % cols]));
  }
}

// Block (32, 16): column blockIdx.x*32 + threadIdx.x; threadIdx.y takes rows
// y, y+16, ...; the 16 partials are added in y order. Fixed shape, so the
// result is run-to-run deterministic.
template <typename T>
__global__ void BiasGradKernel(T* dbias, const T* dout, int64_t rows, int64_t cols) {
  __shared__ float partial[16][32];
  const int64_t c = blockIdx.x * int64_t{32} + threadIdx.x;
  float acc = 0.0f;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += 16) acc += Load(dout[r * cols + c]);
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float sum = 0.0f;
    for (int y = 0; y < 16; ++y) sum += partial[y][threadIdx.x];
    dbias[c] = Store<T>(Load(dbias[c]) + sum);
  }
}

}  // namespace

absl::Status Gemm(const KernelContext& ctx, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
                  int64_t ldc, DType dtype) {
  if (ctx.cublas_handle == nullptr) {
    return absl::FailedPreconditionError("Gemm: ctx.cublas_handle is null on cuda (see kernels/cuda/cuda_resources.h)");
  }
  cublasHandle_t handle = static_cast<cublasHandle_t>(ctx.cublas_handle);
  {
    absl::Status s = CublasStatus("cublasSetStream", cublasSetStream(handle, StreamOf(ctx)));
    if (!s.ok()) return s;
  }
  // Row-major C = op(A)·op(B) is column-major C^T = op(B)^T · op(A)^T, and a
  // row-major matrix read column-major is its transpose: swap A and B.
  const cublasOperation_t op_a = trans_a == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t type = CudaType(dtype);
  return CublasStatus(
      "cublasGemmEx",
      cublasGemmEx(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, type,
                   static_cast<int>(ldb), a, type, static_cast<int>(lda), &beta, c, type, static_cast<int>(ldc),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

absl::Status BiasAdd(const KernelContext& ctx, void* out, const void* bias, int64_t rows, int64_t cols, DType dtype) {
  return DispatchFloatDType(dtype, "BiasAdd", [&](auto tag) {
    using T = decltype(tag);
    BiasAddKernel<T><<<GridFor(rows * cols), kThreads, 0, StreamOf(ctx)>>>(static_cast<T*>(out),
                                                                            static_cast<const T*>(bias), rows, cols);
    return CheckLaunch("BiasAdd");
  });
}

absl::Status BiasGrad(const KernelContext& ctx, void* dbias, const void* dout, int64_t rows, int64_t cols,
                      DType dtype) {
  return DispatchFloatDType(dtype, "BiasGrad", [&](auto tag) {
    using T = decltype(tag);
    dim3 block(32, 16);
    unsigned grid = static_cast<unsigned>((cols + 31) / 32);
    BiasGradKernel<T><<<grid, block, 0, StreamOf(ctx)>>>(static_cast<T*>(dbias), static_cast<const T*>(dout), rows,
                                                          cols);
    return CheckLaunch("BiasGrad");
  });
}

}  // namespace zeroshard::kernels::cuda

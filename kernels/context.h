// KernelContext: where and how a kernel runs, passed first to every kernel.
//
// CPU kernels run their loops on up to `num_threads` threads of the kernel
// thread pool (<= 0 means CpuThreads()).
// OpenBLAS has one process-wide thread count, set by SetCpuThreads(); GEMM
// and the kernels built on it (Linear, Attention) use that one.
//
// CUDA kernels are stream-ordered on `cuda_stream` (nullptr = legacy default
// stream) and return once launched, except where a header says the call
// synchronizes (results returned to the host). `cublas_handle` is needed by
// GEMM, Linear and the LM head; `cuda_workspace` (>= kMinCudaWorkspaceBytes)
// by reductions (SumOfSquares, ScaleInPlace's finite check, cross-entropy's
// mean), and Linear's cuBLASLt matmuls use it too (stream-ordered, so the
// sharing is safe). `cublaslt_handle` is optional: with it, Linear fuses its
// bias (and GELU) into the matmul; without it, Linear runs cuBLAS GEMM and
// separate kernels. kernels/cuda/cuda_resources.h creates all four.
#ifndef ZEROSHARD_KERNELS_CONTEXT_H_
#define ZEROSHARD_KERNELS_CONTEXT_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "core/device.h"

namespace zeroshard::kernels {

inline constexpr size_t kMinCudaWorkspaceBytes = size_t{1} << 20;

struct KernelContext {
  Device device = Device::kCpu;
  int num_threads = 0;              // CPU: threads for loops; <= 0 -> CpuThreads().
  void* cuda_stream = nullptr;      // cudaStream_t
  void* cublas_handle = nullptr;    // cublasHandle_t, bound to cuda_stream by the kernels.
  void* cublaslt_handle = nullptr;  // cublasLtHandle_t; optional (Linear's fused epilogues).
  void* cuda_workspace = nullptr;   // device scratch for reductions
  size_t cuda_workspace_bytes = 0;

  static KernelContext Cpu(int num_threads = 0) {
    KernelContext ctx;
    ctx.num_threads = num_threads;
    return ctx;
  }
};

// Cores / ranks on this host: std::thread::hardware_concurrency() divided by
// the launcher's ranks on this host (core/local_ranks.h) when it says, at least 1. When
// the process is bound to fewer CPUs than the host has (a launcher binding
// ranks to cores), the number of CPUs it may run on instead.
int DefaultCpuThreads();

// `requested` when > 0 (a config's or flag's thread count), else
// DefaultCpuThreads().
int CpuThreadsOrDefault(int requested);

// Sets the process-wide CPU thread count of the kernels' loops and GEMM
// tiles. n < 1 is clamped to 1. OpenBLAS itself is kept single-threaded
// (kernels/cpu/gemm_tiles.h says why). Not thread-safe with respect to
// kernels running concurrently; call it at start-up.
void SetCpuThreads(int n);

// The configured count; DefaultCpuThreads() until SetCpuThreads is called.
int CpuThreads();

// What the CPU kernels run on, for start-up lines and metrics headers.
struct CpuBlasInfo {
  std::string library;  // e.g. "OpenBLAS 0.3.21" (the loaded library's own word)
  std::string core;     // the kernels it picked, e.g. "Haswell", "Zen", "SkylakeX"
  int threads = 1;      // CpuThreads()
  std::string vector_isa = "baseline";  // the element-wise loops' ISA (kernels/cpu/vector_isa.h)
};
CpuBlasInfo DescribeCpuBlas();

// Applies ZEROSHARD_CPU_ISA, the vector ISA of the element-wise CPU loops
// (kernels/cpu/vector_isa.h; unset: the widest the CPU has). Results are the
// same bits at every ISA. kInvalidArgument naming the value if it is not
// baseline, avx2 or avx512, or the CPU lacks it.
absl::Status ConfigureCpuVectorIsa();

// "OpenBLAS 0.3.21, Haswell kernels, 2 threads, avx512 loops".
std::string CpuBlasSummary();

// ctx.num_threads if > 0, else CpuThreads().
int LoopThreads(const KernelContext& ctx);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_CONTEXT_H_

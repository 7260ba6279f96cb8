// CPU causal self-attention (contract in kernels/attention.h).
//
// Each (b, h) pair is one task: three or six small sgemms on strided views
// of qkv plus a row-wise causal softmax, the head's T × T scores in a buffer
// of the task's thread. Tasks are spread over the loop
// threads with OpenBLAS pinned to one thread meanwhile (restored after), so
// no task's arithmetic depends on the thread count.
#ifndef ZEROSHARD_KERNELS_CPU_ATTENTION_CPU_H_
#define ZEROSHARD_KERNELS_CPU_ATTENTION_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace zeroshard::kernels::cpu {

absl::Status AttentionForward(int threads, void* out, float* lse, const void* qkv, int64_t batch, int64_t seq_len,
                              int64_t channels, int64_t num_heads, DType dtype);

absl::Status AttentionBackward(int threads, void* dqkv, const void* dout, const void* qkv, const float* lse,
                               int64_t batch, int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_ATTENTION_CPU_H_

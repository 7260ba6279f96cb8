// Vocabulary-parallel embedding and cross-entropy: the per-rank pieces of
// GPT-2's embed and head units under tensor parallelism (docs/model.md,
// "Tensor parallelism"); the units issue the tp collectives between them.
//
// A tp rank holds rows [vocab_begin, vocab_begin + vocab_local) of the
// padded vocabulary (wte's rows, the head's logit columns); of those the
// first `vocab_valid` (0 <= vocab_valid <= vocab_local) are real tokens and
// the rest padding (global index >= vocab, the real vocabulary size).
// B batch, T sequence length, C channels, N = B*T rows. Tokens and targets
// are global indices. Thread-count independent on CPU; deterministic on CUDA
// (fixed shapes, no atomics).
#ifndef ZEROSHARD_KERNELS_VOCAB_PARALLEL_H_
#define ZEROSHARD_KERNELS_VOCAB_PARALLEL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// The rank's vocabulary rows.
struct VocabRange {
  int64_t begin = 0;  // first global row held
  int64_t local = 0;  // rows held (padding included)
  int64_t valid = 0;  // of those, the real ones: [begin, begin + valid)
};

// Masked lookup. out (B,T,C) WRITTEN: row r is wte_local[tokens[r] - begin]
// + wpe[r % T] when tokens[r] is in [begin, begin + valid), else 0. Summed
// over the tp ranks this is exactly EmbeddingForward's output (one rank adds
// a non-zero row), in every dtype. wte_local (local,C), wpe (>=T,C). On CPU a
// token outside [0, vocab) is kInvalidArgument naming it and its position.
absl::Status EmbeddingForwardVocabRange(const KernelContext& ctx, void* out, const int32_t* tokens,
                                        const void* wte_local, const void* wpe, int64_t batch, int64_t seq_len,
                                        int64_t channels, VocabRange range, int64_t vocab, DType dtype);

// dwte_local (local,C) += the dout rows of the tokens in the range, scattered
// by token - begin; dwpe (T,C) += sum over b of dout, or skipped when null.
// Both ACCUMULATE, in (b,t) order per element as EmbeddingBackward does:
// with the range [0, vocab) the results are EmbeddingBackward's bitwise.
// Rows of dwte_local no token hits (padding among them) are untouched.
// On CPU a token outside [0, vocab) is kInvalidArgument.
absl::Status EmbeddingBackwardVocabRange(const KernelContext& ctx, void* dwte_local, void* dwpe, const void* dout,
                                         const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                                         VocabRange range, int64_t vocab, DType dtype);

// row_max (N, f32) WRITTEN: the max of each row of logits_local (N,local)
// over its first `valid` columns; -inf when valid == 0. The tp all-reduce
// (max) of it is the row's global max.
absl::Status VocabParallelRowMax(const KernelContext& ctx, float* row_max, const void* logits_local, int64_t rows,
                                 VocabRange range, DType dtype);

// sums (2N, f32) WRITTEN, given the global row_max:
//   sums[r]     = sum over the valid columns of exp(logit - row_max[r])
//                 (f32 exp, f64 sum, rounded once);
//   sums[N + r] = the target's logit when targets[r] is in [begin,
//                 begin + valid), else 0 (also for an ignored target < 0).
// The tp all-reduce (sum) of the 2N values is the global sum of exponentials
// and the target logits. On CPU a target >= vocab is kInvalidArgument.
absl::Status VocabParallelSumExpAndTarget(const KernelContext& ctx, float* sums, const void* logits_local,
                                          const float* row_max, const int32_t* targets, int64_t rows,
                                          VocabRange range, int64_t vocab, DType dtype);

// From the reduced row_max (N) and sums (2N): lse (N) = row_max +
// log(sum of exponentials), losses (N) = lse - target logit (0 for an ignored
// row), and loss_sums (2, may be null) = [sum of the valid rows' losses
// (f64 in row order, rounded to f32), their count] as CrossEntropyForward
// gives them. All f32, WRITTEN.
absl::Status VocabParallelLoss(const KernelContext& ctx, float* losses, float* lse, float* loss_sums,
                               const float* row_max, const float* sums, const int32_t* targets, int64_t rows);

// dlogits_local (N,local) WRITTEN = (softmax - onehot(target)) * dloss over
// the valid columns, with the softmax from the global lse; exactly 0 in the
// padding columns and in the rows of ignored targets. With the range
// [0, vocab) of a vocab-wide tensor this is CrossEntropyBackward bitwise.
// dlogits_local may alias logits_local.
absl::Status VocabParallelCrossEntropyBackward(const KernelContext& ctx, void* dlogits_local,
                                               const void* logits_local, const float* lse, const int32_t* targets,
                                               float dloss, int64_t rows, VocabRange range, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_VOCAB_PARALLEL_H_

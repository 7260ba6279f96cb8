// Vocabulary parallelism (Megatron-style tensor parallelism of the token
// embedding and the tied LM head's cross-entropy) and the tp collectives it
// issues (docs/model.md, "Tensor parallelism").
//
// The padded vocabulary Vp (a multiple of the tp size, the real one V <= Vp)
// is split into tp equal row blocks: rank r holds rows [r·Vp/tp,
// (r+1)·Vp/tp) of wte, and the head computes the same columns of the logits.
// Rows >= V are padding: never looked up, never predicted, zero gradient.
// Everything here runs the same collectives in the same order on every tp
// rank (ctx.parallel.tp), waited for before returning; with tp size 1 none.
// N = B·T rows, C channels.
#ifndef ZEROSHARD_NN_VOCAB_PARALLEL_H_
#define ZEROSHARD_NN_VOCAB_PARALLEL_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "kernels/vocab_parallel.h"
#include "nn/unit.h"

namespace zeroshard::vocab_parallel {

// The vocabulary rows tp rank ctx.tp_rank holds. kInvalidArgument naming the
// unit when padded is not a multiple of the tp size or vocab > padded.
absl::StatusOr<kernels::VocabRange> RangeOf(const std::string& unit, int64_t vocab, int64_t padded,
                                            const ParallelContext& parallel);

// Whether `unit` runs sequence-parallel: ctx.sequence_parallel with tp > 1.
inline bool SequenceParallel(const ParallelContext& p) { return p.sequence_parallel && p.tp_size > 1; }

// Rows of a sequence-parallel activation on one rank: N / tp.
// kInvalidArgument naming the unit when tp does not divide N.
absl::StatusOr<int64_t> LocalRows(const std::string& unit, int64_t rows, const ParallelContext& parallel);

// The tp collectives, issued on ctx.parallel.tp after the queued kernels
// finished and waited for. Errors keep the collective's code and name the
// unit, the collective and what it moved ("head: tp AllReduce(max) of the
// logits' row max (16 f32) failed: ..."); kFailedPrecondition when tp > 1
// and the communicator is missing, of another size or rank, or on another
// device than the compute. No-ops at tp size 1 (AllGather/ReduceScatter
// then copy in to out).
//   AllReduce:     buf (count) = op over ranks, in place.
//   AllGather:     out (tp·count) = every rank's in (count), in rank order.
//   ReduceScatter: out (count) = sum over ranks of in[rank·count, +count).
absl::Status AllReduce(const UnitContext& ctx, const std::string& unit, const char* what, void* buf, int64_t count,
                       DType dtype, ReduceOp op);
absl::Status AllGather(const UnitContext& ctx, const std::string& unit, const char* what, const void* in, void* out,
                       int64_t count, DType dtype);
absl::Status ReduceScatter(const UnitContext& ctx, const std::string& unit, const char* what, const void* in,
                           void* out, int64_t count, DType dtype);

// The token embedding with wte split on rows (wte_local (Vp/tp, C)) and wpe
// (max_T, C) replicated.
class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding(std::string unit, int64_t vocab, int64_t padded_vocab, int64_t max_seq_len, int64_t channels)
      : unit_(std::move(unit)), v_(vocab), vp_(padded_vocab), max_t_(max_seq_len), c_(channels) {}

  // out WRITTEN = wte[tokens] + wpe[t]: (B,T,C) on every rank, or under
  // sequence parallelism this rank's rows [r·N/tp, (r+1)·N/tp) of the
  // flattened (N, C), as {N/tp, C}. Each rank looks up the tokens it holds
  // (adding their wpe rows), the others give zeros; then one tp AllReduce
  // (N·C), or a ReduceScatter (N/tp·C out) under sequence parallelism:
  // bitwise the unsplit embedding's output. tokens (B,T) i32.
  absl::Status Forward(const UnitContext& ctx, const TensorView& wte_local, const TensorView& wpe,
                       const TensorView& tokens, const TensorView& out) const;

  // dwte_local (Vp/tp, C) += the output gradient rows of this rank's tokens;
  // dwpe (max_T, C) += the whole output gradient summed over the batch
  // (rows >= T untouched), identical and complete on every rank. dout is
  // (B,T,C), or {N/tp, C} under sequence parallelism (then one tp AllGather
  // of N/tp·C per rank first). Either gradient may be null (skipped); both
  // null: nothing is done, no collective.
  absl::Status Backward(const UnitContext& ctx, const TensorView& tokens, const TensorView& dout,
                        const TensorView& dwte_local, const TensorView& dwpe) const;

 private:
  absl::Status CheckTokens(const UnitContext& ctx, const TensorView& tokens) const;

  std::string unit_;
  int64_t v_, vp_, max_t_, c_;
};

// Softmax cross-entropy over logits split on columns: logits_local (N,
// Vp/tp) in compute dtype, targets (N) i32 in [0, V) or negative (ignored).
class VocabParallelCrossEntropy {
 public:
  VocabParallelCrossEntropy(std::string unit, int64_t vocab, int64_t padded_vocab)
      : unit_(std::move(unit)), v_(vocab), vp_(padded_vocab) {}

  // losses (N), lse (N), loss_sums (2) WRITTEN, f32, identical on every rank
  // (CrossEntropy::Forward's contract over the real columns). Two tp
  // AllReduces: max (N f32), then sum of [Σexp(logit - max) | target logit]
  // (2N f32). Full logits never exist on one rank.
  absl::Status Forward(const UnitContext& ctx, const TensorView& logits_local, const TensorView& targets,
                       const TensorView& losses, const TensorView& lse, const TensorView& loss_sums) const;

  // dlogits_local (N, Vp/tp) WRITTEN = (softmax - onehot) * dloss; exactly 0
  // in padding columns and ignored rows. No collective.
  absl::Status Backward(const UnitContext& ctx, const TensorView& logits_local, const TensorView& lse,
                        const TensorView& targets, float dloss, const TensorView& dlogits_local) const;

 private:
  std::string unit_;
  int64_t v_, vp_;
};

}  // namespace zeroshard::vocab_parallel

#endif  // ZEROSHARD_NN_VOCAB_PARALLEL_H_

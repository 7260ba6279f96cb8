#include "nn/vocab_parallel.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "kernels/cast.h"
#include "nn/tensor_checks.h"

namespace zeroshard::vocab_parallel {
namespace {

// The tp communicator, checked against the context; null at tp size 1.
absl::StatusOr<Communicator*> TpOf(const UnitContext& ctx, const std::string& unit) {
  const ParallelContext& p = ctx.parallel;
  if (p.tp_size == 1) return nullptr;
  if (p.tp == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(unit, ": tp size ", p.tp_size, " but no tp communicator"));
  }
  if (p.tp->size() != p.tp_size || p.tp->rank() != p.tp_rank) {
    return absl::FailedPreconditionError(absl::StrCat(unit, ": tp communicator '", p.tp->name(), "' is rank ",
                                                      p.tp->rank(), " of ", p.tp->size(), ", expected rank ",
                                                      p.tp_rank, " of ", p.tp_size));
  }
  if (p.tp->device() != ctx.compute.kernels.device) {
    return absl::FailedPreconditionError(absl::StrCat(unit, ": tp communicator '", p.tp->name(), "' moves ",
                                                      DeviceName(p.tp->device()), " buffers but the unit computes on ",
                                                      DeviceName(ctx.compute.kernels.device)));
  }
  return p.tp;
}

// Waits for `work` (issued just before; drawn on the timeline as "tp <op>"
// with `what` when it records).
absl::Status Finish(const UnitContext& ctx, const std::string& unit, const char* op, const char* what, int64_t count,
                    DType dtype, std::unique_ptr<Work> work) {
  const auto issued = std::chrono::steady_clock::now();
  // On the compute stream: the kernels after it read the result (a host
  // wait for host backends, whose staging copies order with the stream).
  absl::Status s = WaitTracedOn(*work, ctx.compute.kernels.cuda_stream, ctx.parallel.timeline, "tp",
                                absl::StrCat("tp ", op), absl::StrCat(unit, " ", what), issued,
                                count * static_cast<int64_t>(DTypeSize(dtype)));
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(unit, ": tp ", op, " of ", what, " (", count, " ", DTypeName(dtype),
                                             ") failed: ", s.message()));
}

absl::Status CopyIfDistinct(const UnitContext& ctx, const void* in, void* out, int64_t count, DType dtype) {
  if (in == out || count == 0) return absl::OkStatus();
  return kernels::Cast(ctx.compute.kernels, out, dtype, in, dtype, count);
}

}  // namespace

absl::StatusOr<kernels::VocabRange> RangeOf(const std::string& unit, int64_t vocab, int64_t padded,
                                            const ParallelContext& parallel) {
  if (parallel.tp_size < 1 || parallel.tp_rank < 0 || parallel.tp_rank >= parallel.tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(unit, ": tp rank ", parallel.tp_rank, " of ", parallel.tp_size, " is not a rank of the group"));
  }
  if (vocab < 1 || vocab > padded || padded % parallel.tp_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": the padded vocabulary ", padded, " (real ", vocab,
                                                   ") does not split over tp ", parallel.tp_size,
                                                   "; set the model's vocab_multiple to a multiple of the tp size"));
  }
  kernels::VocabRange r;
  r.local = padded / parallel.tp_size;
  r.begin = parallel.tp_rank * r.local;
  r.valid = std::max<int64_t>(0, std::min<int64_t>(r.local, vocab - r.begin));
  return r;
}

absl::StatusOr<int64_t> LocalRows(const std::string& unit, int64_t rows, const ParallelContext& parallel) {
  if (rows % parallel.tp_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": sequence parallelism splits the ", rows,
                                                   " rows (batch x sequence) over tp ", parallel.tp_size,
                                                   ", which does not divide them"));
  }
  return rows / parallel.tp_size;
}

absl::Status AllReduce(const UnitContext& ctx, const std::string& unit, const char* what, void* buf, int64_t count,
                       DType dtype, ReduceOp op) {
  ASSIGN_OR_RETURN(Communicator * tp, TpOf(ctx, unit));
  if (tp == nullptr) return absl::OkStatus();
  const std::string name = absl::StrCat("AllReduce(", ReduceOpName(op), ")");
  return Finish(ctx, unit, name.c_str(), what, count, dtype, tp->AllReduce(buf, count, dtype, op));
}

absl::Status AllGather(const UnitContext& ctx, const std::string& unit, const char* what, const void* in, void* out,
                       int64_t count, DType dtype) {
  ASSIGN_OR_RETURN(Communicator * tp, TpOf(ctx, unit));
  if (tp == nullptr) return CopyIfDistinct(ctx, in, out, count, dtype);
  return Finish(ctx, unit, "AllGather", what, count, dtype, tp->AllGather(in, out, count, dtype));
}

absl::Status ReduceScatter(const UnitContext& ctx, const std::string& unit, const char* what, const void* in,
                           void* out, int64_t count, DType dtype) {
  ASSIGN_OR_RETURN(Communicator * tp, TpOf(ctx, unit));
  if (tp == nullptr) return CopyIfDistinct(ctx, in, out, count, dtype);
  return Finish(ctx, unit, "ReduceScatter", what, count, dtype,
                tp->ReduceScatter(in, out, count, dtype, ReduceOp::kSum));
}

// ---------------------------------------------------------------------------
// VocabParallelEmbedding

absl::Status VocabParallelEmbedding::CheckTokens(const UnitContext& ctx, const TensorView& tokens) const {
  const Device dev = ctx.compute.kernels.device;
  if (tokens.shape.size() != 2) return CheckTensor(tokens, "tokens", DType::kI32, {-1, -1}, dev);
  RETURN_IF_ERROR(CheckTensor(tokens, "tokens", DType::kI32, tokens.shape, dev));
  if (tokens.shape[1] > max_t_) {
    return absl::InvalidArgumentError(absl::StrCat("sequence length ", tokens.shape[1],
                                                   " exceeds the model's position table of ", max_t_));
  }
  return absl::OkStatus();
}

absl::Status VocabParallelEmbedding::Forward(const UnitContext& ctx, const TensorView& wte_local,
                                             const TensorView& wpe, const TensorView& tokens,
                                             const TensorView& out) const {
  const ComputeContext& cc = ctx.compute;
  const DType dt = cc.compute_dtype;
  const Device dev = cc.kernels.device;
  RETURN_IF_ERROR(CheckTokens(ctx, tokens));
  const int64_t b = tokens.shape[0], t = tokens.shape[1], n = b * t;
  ASSIGN_OR_RETURN(const kernels::VocabRange range, RangeOf(unit_, v_, vp_, ctx.parallel));
  RETURN_IF_ERROR(CheckTensor(wte_local, "wte.weight (this tp rank's rows)", dt, {range.local, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(wpe, "wpe.weight", dt, {max_t_, c_}, dev));
  if (!SequenceParallel(ctx.parallel)) {
    RETURN_IF_ERROR(CheckTensor(out, "embedding output", dt, {b, t, c_}, dev));
    RETURN_IF_ERROR(kernels::EmbeddingForwardVocabRange(cc.kernels, out.data, tokens.as<const int32_t>(),
                                                        wte_local.data, wpe.data, b, t, c_, range, v_, dt));
    return AllReduce(ctx, unit_, "the embedding output", out.data, n * c_, dt, ReduceOp::kSum);
  }
  ASSIGN_OR_RETURN(const int64_t rows, LocalRows(unit_, n, ctx.parallel));
  RETURN_IF_ERROR(CheckTensor(out, "embedding output (this tp rank's rows)", dt, {rows, c_}, dev));
  ASSIGN_OR_RETURN(Buffer partial, AllocateOnDevice(cc, MemoryCategory::kWorkspace, dt, n * c_));
  RETURN_IF_ERROR(kernels::EmbeddingForwardVocabRange(cc.kernels, partial.data(), tokens.as<const int32_t>(),
                                                      wte_local.data, wpe.data, b, t, c_, range, v_, dt));
  return ReduceScatter(ctx, unit_, "the embedding output", partial.data(), out.data, rows * c_, dt);
}

absl::Status VocabParallelEmbedding::Backward(const UnitContext& ctx, const TensorView& tokens, const TensorView& dout,
                                              const TensorView& dwte_local, const TensorView& dwpe) const {
  const ComputeContext& cc = ctx.compute;
  const DType dt = cc.compute_dtype;
  const Device dev = cc.kernels.device;
  RETURN_IF_ERROR(CheckTokens(ctx, tokens));
  const int64_t b = tokens.shape[0], t = tokens.shape[1], n = b * t;
  ASSIGN_OR_RETURN(const kernels::VocabRange range, RangeOf(unit_, v_, vp_, ctx.parallel));
  const bool sp = SequenceParallel(ctx.parallel);
  int64_t rows = n;
  if (sp) {
    ASSIGN_OR_RETURN(rows, LocalRows(unit_, n, ctx.parallel));
  }
  if (sp) {
    RETURN_IF_ERROR(CheckTensor(dout, "embedding output grad (this tp rank's rows)", dt, {rows, c_}, dev));
  } else {
    RETURN_IF_ERROR(CheckTensor(dout, "embedding output grad", dt, {b, t, c_}, dev));
  }
  if (dwte_local.data == nullptr && dwpe.data == nullptr) return absl::OkStatus();
  if (dwte_local.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(dwte_local, "wte.weight grad (this tp rank's rows)", dt, {range.local, c_}, dev));
  }
  if (dwpe.data != nullptr) RETURN_IF_ERROR(CheckTensor(dwpe, "wpe.weight grad", dt, {max_t_, c_}, dev));
  const void* full = dout.data;
  Buffer gathered;
  if (sp) {
    ASSIGN_OR_RETURN(gathered, AllocateOnDevice(cc, MemoryCategory::kWorkspace, dt, n * c_));
    RETURN_IF_ERROR(
        AllGather(ctx, unit_, "the embedding output grad", dout.data, gathered.data(), rows * c_, dt));
    full = gathered.data();
  }
  if (dwte_local.data != nullptr) {
    return kernels::EmbeddingBackwardVocabRange(cc.kernels, dwte_local.data, dwpe.data, full,
                                                tokens.as<const int32_t>(), b, t, c_, range, v_, dt);
  }
  // Only wpe trains: no token falls in an empty range, so the one-row
  // scratch standing in for wte's gradient is never written.
  ASSIGN_OR_RETURN(Buffer scratch, AllocateOnDevice(cc, MemoryCategory::kWorkspace, dt, c_));
  return kernels::EmbeddingBackwardVocabRange(cc.kernels, scratch.data(), dwpe.data, full, tokens.as<const int32_t>(),
                                              b, t, c_, kernels::VocabRange{0, 1, 0}, v_, dt);
}

// ---------------------------------------------------------------------------
// VocabParallelCrossEntropy

absl::Status VocabParallelCrossEntropy::Forward(const UnitContext& ctx, const TensorView& logits_local,
                                                const TensorView& targets, const TensorView& losses,
                                                const TensorView& lse, const TensorView& loss_sums) const {
  const ComputeContext& cc = ctx.compute;
  const DType dt = cc.compute_dtype;
  const Device dev = cc.kernels.device;
  ASSIGN_OR_RETURN(const kernels::VocabRange range, RangeOf(unit_, v_, vp_, ctx.parallel));
  const int64_t n = logits_local.shape.size() == 2 ? logits_local.shape[0] : -1;
  RETURN_IF_ERROR(CheckTensor(logits_local, "logits (this tp rank's columns)", dt, {n, range.local}, dev));
  RETURN_IF_ERROR(CheckTensor(targets, "targets", DType::kI32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(losses, "losses", DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(lse, "log-sum-exp", DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(loss_sums, "loss sums", DType::kF32, {2}, dev));
  const auto ws = MemoryCategory::kWorkspace;
  ASSIGN_OR_RETURN(Buffer row_max, AllocateOnDevice(cc, ws, DType::kF32, n));
  ASSIGN_OR_RETURN(Buffer sums, AllocateOnDevice(cc, ws, DType::kF32, 2 * n));
  RETURN_IF_ERROR(kernels::VocabParallelRowMax(cc.kernels, row_max.as<float>(), logits_local.data, n, range, dt));
  RETURN_IF_ERROR(AllReduce(ctx, unit_, "the logits' row max", row_max.data(), n, DType::kF32, ReduceOp::kMax));
  RETURN_IF_ERROR(kernels::VocabParallelSumExpAndTarget(cc.kernels, sums.as<float>(), logits_local.data,
                                                        row_max.as<const float>(), targets.as<const int32_t>(), n,
                                                        range, v_, dt));
  RETURN_IF_ERROR(AllReduce(ctx, unit_, "the softmax sums and target logits", sums.data(), 2 * n, DType::kF32,
                            ReduceOp::kSum));
  return kernels::VocabParallelLoss(cc.kernels, losses.as<float>(), lse.as<float>(), loss_sums.as<float>(),
                                    row_max.as<const float>(), sums.as<const float>(), targets.as<const int32_t>(), n);
}

absl::Status VocabParallelCrossEntropy::Backward(const UnitContext& ctx, const TensorView& logits_local,
                                                 const TensorView& lse, const TensorView& targets, float dloss,
                                                 const TensorView& dlogits_local) const {
  const ComputeContext& cc = ctx.compute;
  const DType dt = cc.compute_dtype;
  const Device dev = cc.kernels.device;
  ASSIGN_OR_RETURN(const kernels::VocabRange range, RangeOf(unit_, v_, vp_, ctx.parallel));
  const int64_t n = logits_local.shape.size() == 2 ? logits_local.shape[0] : -1;
  RETURN_IF_ERROR(CheckTensor(logits_local, "logits (this tp rank's columns)", dt, {n, range.local}, dev));
  RETURN_IF_ERROR(CheckTensor(lse, "log-sum-exp", DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(targets, "targets", DType::kI32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(dlogits_local, "logits grad (this tp rank's columns)", dt, {n, range.local}, dev));
  return kernels::VocabParallelCrossEntropyBackward(cc.kernels, dlogits_local.data, logits_local.data,
                                                    lse.as<const float>(), targets.as<const int32_t>(), dloss, n,
                                                    range, dt);
}

}  // namespace zeroshard::vocab_parallel

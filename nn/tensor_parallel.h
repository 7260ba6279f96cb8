// Collectives a tensor-parallel unit issues over its tp group
// (UnitContext::parallel; docs/model.md, "Tensor parallelism").
//
// Each helper issues one collective on `par.tp`, waits for it on the host
// (Work::Wait) and returns its status with `what` (the unit and tensor, e.g.
// "h.0.attn.c_proj output") and the collective named in the message; the
// error code is the communicator's. Every rank of the group must call the
// same helpers in the same order with the same element counts (the
// Communicator contract, comm/communicator.h).
//
// Rows: a "rows" tensor is row-major with rows on dimension 0; a (tp·R, ...)
// tensor's rank-r slice is its rows [r·R, (r+1)·R), contiguous in memory.
//
// Devices: the views must live where the communicator wants its buffers
// (Communicator::device(): the CPU for MPI and threads, CUDA for NCCL).
// On CUDA the communicator orders its work after the compute stream (NCCL:
// SetNcclComputeStream) and Wait returns once the result is in memory, so
// kernels queued afterwards read it.
//
// At tp_size 1 no collective is issued: an all-reduce leaves the tensor as
// it is, an all-gather or reduce-scatter copies `in` to `out` (nothing when
// they are the same memory), on ctx's stream.
#ifndef ZEROSHARD_NN_TENSOR_PARALLEL_H_
#define ZEROSHARD_NN_TENSOR_PARALLEL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/buffer.h"
#include "nn/unit.h"

namespace zeroshard {

// OK when `par` is a usable group for a unit computing on ctx's device:
// tp_size >= 1, 0 <= tp_rank < tp_size and, when tp_size > 1, a non-null
// communicator whose size, rank and device match. kInvalidArgument naming
// `unit` otherwise, e.g. "h.0: tp size 2 but no tp communicator".
absl::Status CheckTensorParallel(const ParallelContext& par, const ComputeContext& ctx, absl::string_view unit);

// The rows each rank holds when `rows` rows are split over tp_size ranks;
// kInvalidArgument naming `what` when tp_size does not divide them.
absl::StatusOr<int64_t> TpLocalRows(int64_t rows, int tp_size, absl::string_view what);

// Rank `rank`'s rows of a (size·R, ...) view: rows [rank·R, (rank+1)·R).
// Precondition: size divides full.shape[0].
TensorView TpRowSlice(const TensorView& full, int rank, int size);

// t = Σ over the tp ranks of t, in place (f32, bf16 or f16; how a backend
// accumulates half types is its own: comm/communicator.h).
absl::Status TpAllReduceSum(const ParallelContext& par, const ComputeContext& ctx, const TensorView& t,
                            absl::string_view what);

// out (tp·R, ...) = every rank's in (R, ...) stacked in rank order. `in` may
// be out's own slice, TpRowSlice(out, tp_rank, tp_size) (in place);
// otherwise they must not overlap.
absl::Status TpAllGatherRows(const ParallelContext& par, const ComputeContext& ctx, const TensorView& in,
                             const TensorView& out, absl::string_view what);

// out (R, ...) = Σ over the tp ranks of their rows [tp_rank·R, (tp_rank+1)·R)
// of in (tp·R, ...). in and out must not overlap.
absl::Status TpReduceScatterRows(const ParallelContext& par, const ComputeContext& ctx, const TensorView& in,
                                 const TensorView& out, absl::string_view what);

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_TENSOR_PARALLEL_H_

#include "nn/tensor_parallel.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "kernels/cast.h"

namespace zeroshard {
namespace {

bool IsFloat(DType dt) { return dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16; }

// "h.0.ln_1 output: tp AllGather on 'tp' (bf16, 96 elements per rank)".
std::string Describe(absl::string_view what, const char* op, const Communicator* comm, DType dtype, int64_t count,
                     const char* per) {
  return absl::StrCat(what, ": tp ", op, comm == nullptr ? "" : absl::StrCat(" on '", comm->name(), "'"), " (",
                      DTypeName(dtype), ", ", count, " elements", per, ")");
}

// The group's views must be on the communicator's device, in one float dtype.
absl::Status CheckViews(const ParallelContext& par, const TensorView& a, const TensorView& b, absl::string_view what,
                        const char* op) {
  if (a.dtype != b.dtype || !IsFloat(a.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": tp ", op, " of ", DTypeName(a.dtype), " into ",
                                                   DTypeName(b.dtype), ", expected one of f32, bf16, f16"));
  }
  if ((a.data == nullptr && a.numel() > 0) || (b.data == nullptr && b.numel() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": tp ", op, " of a null tensor"));
  }
  if (par.tp_size > 1) {
    if (par.tp == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": tp ", op, " with tp size ", par.tp_size,
                                                     " but no tp communicator"));
    }
    const Device want = par.tp->device();
    if (a.device != want || b.device != want) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": tp ", op, " of a tensor on ", DeviceName(a.device),
                                                     " but communicator '", par.tp->name(), "' works on ",
                                                     DeviceName(want)));
    }
  }
  return absl::OkStatus();
}

// Waits for `work` (issued just before; drawn on par.timeline as
// "tp <op>" with `what` when it records) on ctx's stream: the kernels
// after it read the result (a host wait for host backends).
absl::Status Finish(const ParallelContext& par, const ComputeContext& ctx, const char* op, absl::string_view what,
                    int64_t bytes, std::unique_ptr<Work> work, const std::string& description) {
  if (work == nullptr) return absl::InternalError(absl::StrCat(description, ": the communicator returned no work"));
  const auto issued = std::chrono::steady_clock::now();
  absl::Status s = WaitTracedOn(*work, ctx.kernels.cuda_stream, par.timeline, "tp", absl::StrCat("tp ", op), what,
                                issued, bytes);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(description, " failed: ", s.message()));
}

// in -> out on ctx's stream (the tp-1 gather and scatter).
absl::Status CopyIfDistinct(const ComputeContext& ctx, const TensorView& in, const TensorView& out) {
  if (in.data == out.data || in.numel() == 0) return absl::OkStatus();
  return kernels::Cast(ctx.kernels, out.data, out.dtype, in.data, in.dtype, in.numel());
}

}  // namespace

absl::Status CheckTensorParallel(const ParallelContext& par, const ComputeContext& ctx, absl::string_view unit) {
  if (par.tp_size < 1 || par.tp_rank < 0 || par.tp_rank >= par.tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(unit, ": tp rank ", par.tp_rank, " of size ", par.tp_size, ", expected 0 <= rank < size"));
  }
  if (par.tp_size == 1) return absl::OkStatus();
  if (par.tp == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": tp size ", par.tp_size, " but no tp communicator"));
  }
  if (par.tp->size() != par.tp_size || par.tp->rank() != par.tp_rank) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": tp rank ", par.tp_rank, " of ", par.tp_size,
                                                   " but communicator '", par.tp->name(), "' is rank ",
                                                   par.tp->rank(), " of ", par.tp->size()));
  }
  if (par.tp->device() != ctx.kernels.device) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": computes on ", DeviceName(ctx.kernels.device),
                                                   " but tp communicator '", par.tp->name(), "' works on ",
                                                   DeviceName(par.tp->device())));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TpLocalRows(int64_t rows, int tp_size, absl::string_view what) {
  if (tp_size < 1 || rows < 0 || rows % tp_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", rows, " rows do not split evenly over tp ", tp_size));
  }
  return rows / tp_size;
}

TensorView TpRowSlice(const TensorView& full, int rank, int size) {
  TensorView v = full;
  if (v.shape.empty()) return v;
  const int64_t rows = full.shape[0] / size;
  const int64_t per_row = rows == 0 ? 0 : full.numel() / full.shape[0];
  v.shape[0] = rows;
  if (v.data != nullptr) {
    v.data = static_cast<char*>(full.data) + rank * rows * per_row * static_cast<int64_t>(DTypeSize(full.dtype));
  }
  return v;
}

absl::Status TpAllReduceSum(const ParallelContext& par, const ComputeContext& ctx, const TensorView& t,
                            absl::string_view what) {
  RETURN_IF_ERROR(CheckViews(par, t, t, what, "AllReduce"));
  if (par.tp_size == 1) return absl::OkStatus();
  const std::string d = Describe(what, "AllReduce", par.tp, t.dtype, t.numel(), "");
  return Finish(par, ctx, "AllReduce", what, t.bytes(),
                par.tp->AllReduce(t.data, t.numel(), t.dtype, ReduceOp::kSum), d);
}

absl::Status TpAllGatherRows(const ParallelContext& par, const ComputeContext& ctx, const TensorView& in,
                             const TensorView& out, absl::string_view what) {
  RETURN_IF_ERROR(CheckViews(par, in, out, what, "AllGather"));
  if (out.numel() != in.numel() * par.tp_size) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": tp AllGather of ", in.DebugString(), " into ",
                                                   out.DebugString(), ", expected ", par.tp_size,
                                                   " times the input's elements"));
  }
  if (par.tp_size == 1) return CopyIfDistinct(ctx, in, out);
  const std::string d = Describe(what, "AllGather", par.tp, in.dtype, in.numel(), " per rank");
  return Finish(par, ctx, "AllGather", what, in.bytes(),
                par.tp->AllGather(in.data, out.data, in.numel(), in.dtype), d);
}

absl::Status TpReduceScatterRows(const ParallelContext& par, const ComputeContext& ctx, const TensorView& in,
                                 const TensorView& out, absl::string_view what) {
  RETURN_IF_ERROR(CheckViews(par, in, out, what, "ReduceScatter"));
  if (in.numel() != out.numel() * par.tp_size) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": tp ReduceScatter of ", in.DebugString(), " into ",
                                                   out.DebugString(), ", expected ", par.tp_size,
                                                   " times the output's elements"));
  }
  if (par.tp_size == 1) return CopyIfDistinct(ctx, in, out);
  const std::string d = Describe(what, "ReduceScatter", par.tp, in.dtype, out.numel(), " per rank");
  return Finish(par, ctx, "ReduceScatter", what, out.bytes(),
                par.tp->ReduceScatter(in.data, out.data, out.numel(), in.dtype, ReduceOp::kSum), d);
}

}  // namespace zeroshard

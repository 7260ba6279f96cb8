// Argument checks and allocation shared by the layers and units.
#ifndef ZEROSHARD_NN_TENSOR_CHECKS_H_
#define ZEROSHARD_NN_TENSOR_CHECKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/buffer.h"
#include "nn/unit.h"

namespace zeroshard {

// OK when t has exactly `shape`, `dtype`, a non-null pointer (unless empty)
// and lives on `device`; otherwise kInvalidArgument like
// "c_attn.weight: got f32[16, 32] on cpu, expected f32[16, 48] on cpu".
absl::Status CheckTensor(const TensorView& t, absl::string_view what, DType dtype,
                         const std::vector<int64_t>& shape, Device device);

// A zeroed buffer of `numel` elements on the compute device, in `category`.
absl::StatusOr<Buffer> AllocateOnDevice(const ComputeContext& ctx, MemoryCategory category, DType dtype,
                                        int64_t numel);

// The same with contents undefined, for the output of a call that WRITES
// every element before anything reads it (a GEMM with beta 0, the
// cross-entropy gradient): large outputs are not zero-filled for nothing.
// With output poisoning on, the buffer is filled with 0xFF bytes instead (a
// NaN in every float dtype), so a read of an element nothing wrote shows.
absl::StatusOr<Buffer> AllocateOutputOnDevice(const ComputeContext& ctx, MemoryCategory category, DType dtype,
                                              int64_t numel);

// Output poisoning: on when the environment has ZEROSHARD_POISON_OUTPUTS=1
// at the first allocation, or as set here (tests). Off by default: it costs
// a fill per allocation.
bool PoisonOutputs();
void SetPoisonOutputs(bool on);

// A view of `buf` with `shape` (product must equal buf.numel()).
TensorView View(Buffer& buf, std::vector<int64_t> shape);
TensorView View(const Buffer& buf, std::vector<int64_t> shape);

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_TENSOR_CHECKS_H_

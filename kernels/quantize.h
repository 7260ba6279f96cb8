// Blockwise symmetric int8 quantization (ZeRO++ style), for sending
// parameters and gradients over the wire at a quarter of their f32 size.
//
// Packed form of n elements with block size `block` (nb = ceil(n / block)
// blocks, the last one possibly shorter):
//   [n int8 values][zero padding up to a multiple of 4 bytes][nb f32 scales, little endian]
// The packed pointer must be 4-byte aligned (the scales then are).
//
// Per block: amax = max |x| (f32); scale = amax / 127 (f32 division);
// q = x / scale rounded to nearest, ties to even, clamped to [-127, 127],
// where the rounding is of the exact quotient (f64 division, which for f32
// operands never lands on the wrong side of a half-integer); a block whose
// scale is 0 (all zeros, or an amax so small that amax / 127 underflows) has
// q = 0. So for scales in the normal f32 range |x - q * scale| <= scale / 2
// exactly, and values k * scale (integers k in [-127, 127], scale a power of
// two, 127 * scale in the block) survive the round trip exactly.
//
// Every element is computed on its own from its block's scale, so CPU results
// do not depend on the thread count, and CUDA results are bitwise the CPU's
// (the same IEEE operations, none contracted into an FMA).
#ifndef ZEROSHARD_KERNELS_QUANTIZE_H_
#define ZEROSHARD_KERNELS_QUANTIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// Bytes of the packed form of n elements: n rounded up to a multiple of 4,
// plus 4 per block. -1 when n < 0 or block < 1 (the kernels reject those
// with a status; -1 makes a caller's buffer size check fail rather than pass).
int64_t Int8PackedBytes(int64_t n, int64_t block);

// What QuantizeInt8Blocks does with an inf or NaN element.
enum class NonFiniteInput {
  // kInvalidArgument naming the first such element (lowest index), its
  // value and its block: "quantize: element 17 of 4096 is inf (block 0);
  // int8 quantization needs finite values" (the value: inf, -inf or nan).
  kReject,
  // The block holding it gets scale NaN and q = 0, so all of its
  // dequantized values are NaN: an overflow check downstream sees the
  // overflow (loss-scaled gradients).
  kPropagate,
};

// packed (Int8PackedBytes(n, block) bytes) WRITTEN from in (n elements of
// in_dtype: f32, bf16 or f16), padding bytes included (zero).
//
// residual: null, or n f32 of error feedback. Then the value quantized is
// c = x + residual[i] (f32 add), and residual[i] is WRITTEN with
// c - q * scale (f32): the error this call made, for the next call to
// compensate, so over repeated calls the errors do not accumulate. The
// non-finite checks apply to c. Under kPropagate a non-finite block leaves its
// residual entries unchanged (writing NaN there would poison every later
// call, while the step that overflowed is skipped anyway).
//
// On error nothing of residual is written and packed is unspecified.
// On CUDA, kReject synchronizes ctx.cuda_stream (to return the status) and
// needs ctx.cuda_workspace; kPropagate only launches.
absl::Status QuantizeInt8Blocks(const KernelContext& ctx, void* packed, const void* in, DType in_dtype, int64_t n,
                                int64_t block, NonFiniteInput non_finite, float* residual = nullptr);

// out (n elements of out_dtype: f32, bf16 or f16) WRITTEN = q * scale
// computed in f32, rounded once to out_dtype (nearest even).
absl::Status DequantizeInt8Blocks(const KernelContext& ctx, void* out, DType out_dtype, const void* packed, int64_t n,
                                  int64_t block);

// acc (n f32) += q * scale (f32 product, then one f32 add): the f32 sum of
// dequantized chunks (a reduce-scatter of quantized gradients).
absl::Status DequantizeInt8BlocksAccumulate(const KernelContext& ctx, float* acc, const void* packed, int64_t n,
                                            int64_t block);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_QUANTIZE_H_

// Causal attention as tiled online-softmax kernels: a block of
// kRowsPerBlock threads per (b, h, block of rows), one row per thread in
// registers, the other side streamed through shared memory in tiles of
// kTileRows rows. The per-row arithmetic is kernels/attention_tiles.h,
// which the host test replays; what is here is the indexing and the tile
// loads. Nothing T × T is stored. The backward is three kernels (dq per
// query row; dk and dv per key row) after a per-row D = dout · out, so each
// output has a single writer and no atomics: results are repeatable.
#include <type_traits>

#include "kernels/attention_tiles.h"
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/float_types.h"

namespace zeroshard::kernels::cuda {
namespace {

using attention_tiles::kRowsPerBlock;
using attention_tiles::kTileRows;

// Layout of one (b, h): q, k, v rows of qkv (B,T,3C) and rows of out/dout
// (B,T,C), hs channels each at offset h*hs.
struct Head {
  int64_t t_len, c, nh, hs;
  int64_t b, h;
  __device__ Head(int64_t t_len_, int64_t c_, int64_t nh_, int64_t bh)
      : t_len(t_len_), c(c_), nh(nh_), hs(c_ / nh_), b(bh / nh_), h(bh % nh_) {}
  // which: 0 q, 1 k, 2 v. Row stride 3C.
  template <typename T>
  __device__ const T* Qkv(const T* qkv, int which) const {
    return qkv + b * t_len * 3 * c + which * c + h * hs;
  }
  template <typename T>
  __device__ T* Qkv(T* qkv, int which) const {
    return qkv + b * t_len * 3 * c + which * c + h * hs;
  }
  // Row stride C.
  template <typename T>
  __device__ T* Rows(T* x) const {
    return x + b * t_len * c + h * hs;
  }
  __device__ int64_t RowValue(int64_t t) const { return (b * nh + h) * t_len + t; }
};

// Streams the K and V tiles that query rows [row0, row0 + kRowsPerBlock)
// see through shared memory and calls f(k_tile, v_tile, k0) for each, on
// every thread. Holds barriers: every thread of the block must call it.
template <int kHs, typename T, typename F>
__device__ __forceinline__ void ForEachKeyTile(const Head& hd, const T* qkv, int64_t row0, F&& f) {
  __shared__ __align__(16) float k_tile[kTileRows * kHs];
  __shared__ __align__(16) float v_tile[kTileRows * kHs];
  const int64_t last_row = (row0 + kRowsPerBlock < hd.t_len ? row0 + kRowsPerBlock : hd.t_len) - 1;
  for (int64_t k0 = 0; k0 <= last_row; k0 += kTileRows) {
    __syncthreads();  // the previous tile is consumed
    attention_tiles::LoadTileShare<kHs>(k_tile, hd.Qkv(qkv, 1), 3 * hd.c, k0, hd.t_len, hd.hs, threadIdx.x,
                                        blockDim.x);
    attention_tiles::LoadTileShare<kHs>(v_tile, hd.Qkv(qkv, 2), 3 * hd.c, k0, hd.t_len, hd.hs, threadIdx.x,
                                        blockDim.x);
    __syncthreads();
    f(k_tile, v_tile, k0);
  }
}

// Grid (B*NH, ceil(T / kRowsPerBlock)); thread x owns row blockIdx.y * kRowsPerBlock + x.
template <typename T, int kHs>
__global__ void __launch_bounds__(kRowsPerBlock)
    ForwardKernel(T* out, float* lse, const T* qkv, int64_t t_len, int64_t c, int64_t nh, float scale) {
  const Head hd(t_len, c, nh, blockIdx.x);
  const int64_t row0 = int64_t{blockIdx.y} * kRowsPerBlock;
  const int64_t t = row0 + threadIdx.x;
  const bool active = t < t_len;
  attention_tiles::ForwardRow<kHs> r;
  attention_tiles::ForwardRowBegin(r);
  if (active) attention_tiles::LoadRow<kHs>(r.q, hd.Qkv(qkv, 0) + t * 3 * c, hd.hs);
  ForEachKeyTile<kHs>(hd, qkv, row0, [&](const float* k_tile, const float* v_tile, int64_t k0) {
    if (active) attention_tiles::ForwardRowTile(r, k_tile, v_tile, k0, t, scale);
  });
  if (!active) return;
  lse[hd.RowValue(t)] = attention_tiles::ForwardRowEnd(r);
  attention_tiles::StoreRow<kHs>(hd.Rows(out) + t * c, r.o, hd.hs);
}

// d[(b,h,t)] = dout_t · out_t over the head's channels; one thread per row.
template <typename T>
__global__ void RowDotKernel(float* d, const T* dout, const T* out, int64_t batch, int64_t t_len, int64_t c,
                             int64_t nh) {
  const int64_t rows = batch * nh * t_len;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows; i += int64_t{gridDim.x} * blockDim.x) {
    const Head hd(t_len, c, nh, i / t_len);
    const int64_t t = i % t_len;
    d[i] = attention_tiles::RowDot(hd.Rows(dout) + t * c, hd.Rows(out) + t * c, hd.hs);
  }
}

// dq: grid and rows as ForwardKernel.
template <typename T, int kHs>
__global__ void __launch_bounds__(kRowsPerBlock)
    QueryGradKernel(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* d, int64_t t_len, int64_t c,
                    int64_t nh, float scale) {
  const Head hd(t_len, c, nh, blockIdx.x);
  const int64_t row0 = int64_t{blockIdx.y} * kRowsPerBlock;
  const int64_t t = row0 + threadIdx.x;
  const bool active = t < t_len;
  attention_tiles::QueryGradRow<kHs> r;
  attention_tiles::Zero<kHs>(r.dq);
  if (active) {
    attention_tiles::LoadRow<kHs>(r.q, hd.Qkv(qkv, 0) + t * 3 * c, hd.hs);
    attention_tiles::LoadRow<kHs>(r.dout, hd.Rows(dout) + t * c, hd.hs);
    r.lse = lse[hd.RowValue(t)];
    r.d = d[hd.RowValue(t)];
  }
  ForEachKeyTile<kHs>(hd, qkv, row0, [&](const float* k_tile, const float* v_tile, int64_t k0) {
    if (active) attention_tiles::QueryGradRowTile(r, k_tile, v_tile, k0, t, scale);
  });
  if (!active) return;
  attention_tiles::Scale<kHs>(r.dq, scale);
  attention_tiles::StoreRow<kHs>(hd.Qkv(dqkv, 0) + t * 3 * c, r.dq, hd.hs);
}

// dk (kValues false) or dv (true): grid (B*NH, ceil(T / kRowsPerBlock)),
// thread x owns key row blockIdx.y * kRowsPerBlock + x; query tiles from the
// block's first key on (earlier queries see none of its keys).
template <typename T, int kHs, bool kValues>
__global__ void __launch_bounds__(kRowsPerBlock)
    KeyValueGradKernel(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* d, int64_t t_len,
                       int64_t c, int64_t nh, float scale) {
  __shared__ __align__(16) float q_tile[kTileRows * kHs];
  __shared__ __align__(16) float dout_tile[kTileRows * kHs];
  __shared__ float lse_tile[kTileRows];
  __shared__ float d_tile[kTileRows];
  const Head hd(t_len, c, nh, blockIdx.x);
  const int64_t row0 = int64_t{blockIdx.y} * kRowsPerBlock;
  const int64_t j = row0 + threadIdx.x;
  const bool active = j < t_len;
  const float* lse_bh = lse + hd.RowValue(0);
  const float* d_bh = d + hd.RowValue(0);
  std::conditional_t<kValues, attention_tiles::ValueGradRow<kHs>, attention_tiles::KeyGradRow<kHs>> r;
  if constexpr (kValues) {
    attention_tiles::Zero<kHs>(r.dv);
    if (active) attention_tiles::LoadRow<kHs>(r.k, hd.Qkv(qkv, 1) + j * 3 * c, hd.hs);
  } else {
    attention_tiles::Zero<kHs>(r.dk);
    if (active) {
      attention_tiles::LoadRow<kHs>(r.k, hd.Qkv(qkv, 1) + j * 3 * c, hd.hs);
      attention_tiles::LoadRow<kHs>(r.v, hd.Qkv(qkv, 2) + j * 3 * c, hd.hs);
    }
  }
  for (int64_t i0 = row0; i0 < t_len; i0 += kTileRows) {
    __syncthreads();
    attention_tiles::LoadTileShare<kHs>(q_tile, hd.Qkv(qkv, 0), 3 * c, i0, t_len, hd.hs, threadIdx.x, blockDim.x);
    attention_tiles::LoadTileShare<kHs>(dout_tile, hd.Rows(dout), c, i0, t_len, hd.hs, threadIdx.x, blockDim.x);
    attention_tiles::LoadRowValuesShare(lse_tile, lse_bh, i0, t_len, threadIdx.x, blockDim.x);
    if constexpr (!kValues) attention_tiles::LoadRowValuesShare(d_tile, d_bh, i0, t_len, threadIdx.x, blockDim.x);
    __syncthreads();
    if (!active) continue;
    if constexpr (kValues) {
      attention_tiles::ValueGradRowTile(r, q_tile, dout_tile, lse_tile, i0, j, t_len, scale);
    } else {
      attention_tiles::KeyGradRowTile(r, q_tile, dout_tile, lse_tile, d_tile, i0, j, t_len, scale);
    }
  }
  if (!active) return;
  if constexpr (kValues) {
    attention_tiles::StoreRow<kHs>(hd.Qkv(dqkv, 2) + j * 3 * c, r.dv, hd.hs);
  } else {
    attention_tiles::Scale<kHs>(r.dk, scale);
    attention_tiles::StoreRow<kHs>(hd.Qkv(dqkv, 1) + j * 3 * c, r.dk, hd.hs);
  }
}

absl::Status CheckShape(const char* kernel, int64_t batch, int64_t seq_len, int64_t channels, int64_t num_heads) {
  const int64_t hs = channels / num_heads;
  if (attention_tiles::PaddedHeadSize(hs) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": head size channels / num_heads = ", hs,
                                                   " is above the CUDA kernels' maximum of ",
                                                   attention_tiles::kMaxHeadSize));
  }
  if (batch * num_heads > int64_t{0x7fffffff}) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": batch * num_heads = ", batch * num_heads, " exceeds the grid's 2^31 - 1"));
  }
  if ((seq_len + kRowsPerBlock - 1) / kRowsPerBlock > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": seq_len = ", seq_len, " exceeds the grid's ",
                                                   int64_t{65535} * kRowsPerBlock, " rows"));
  }
  return absl::OkStatus();
}

dim3 GridOf(int64_t batch, int64_t seq_len, int64_t num_heads) {
  return dim3(static_cast<unsigned>(batch * num_heads),
              static_cast<unsigned>((seq_len + kRowsPerBlock - 1) / kRowsPerBlock));
}

// Calls f(std::integral_constant<int, kHs>) for hs's padded head size.
template <typename F>
absl::Status DispatchHeadSize(int64_t hs, F&& f) {
  switch (attention_tiles::PaddedHeadSize(hs)) {
    case 32:
      return f(std::integral_constant<int, 32>());
    case 64:
      return f(std::integral_constant<int, 64>());
    default:
      return f(std::integral_constant<int, attention_tiles::kMaxHeadSize>());
  }
}

}  // namespace

absl::Status AttentionForward(const KernelContext& ctx, void* out, float* lse, const void* qkv, int64_t batch,
                              int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype) {
  absl::Status shape = CheckShape("AttentionForward", batch, seq_len, channels, num_heads);
  if (!shape.ok()) return shape;
  const int64_t hs = channels / num_heads;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  return DispatchFloatDType(dtype, "AttentionForward", [&](auto tag) {
    using T = decltype(tag);
    return DispatchHeadSize(hs, [&](auto padded) {
      ForwardKernel<T, decltype(padded)::value><<<GridOf(batch, seq_len, num_heads), kRowsPerBlock, 0, StreamOf(ctx)>>>(
          static_cast<T*>(out), lse, static_cast<const T*>(qkv), seq_len, channels, num_heads, scale);
      return CheckLaunch("AttentionForward");
    });
  });
}

absl::Status AttentionBackward(const KernelContext& ctx, void* dqkv, float* scratch, const void* dout,
                               const void* qkv, const void* out, const float* lse, int64_t batch, int64_t seq_len,
                               int64_t channels, int64_t num_heads, DType dtype) {
  absl::Status shape = CheckShape("AttentionBackward", batch, seq_len, channels, num_heads);
  if (!shape.ok()) return shape;
  const int64_t hs = channels / num_heads;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  cudaStream_t stream = StreamOf(ctx);
  return DispatchFloatDType(dtype, "AttentionBackward", [&](auto tag) {
    using T = decltype(tag);
    T* dx = static_cast<T*>(dqkv);
    const T* dy = static_cast<const T*>(dout);
    const T* x = static_cast<const T*>(qkv);
    float* d = scratch;
    RowDotKernel<T><<<GridFor(batch * num_heads * seq_len), kThreads, 0, stream>>>(
        d, dy, static_cast<const T*>(out), batch, seq_len, channels, num_heads);
    if (absl::Status s = CheckLaunch("AttentionBackward (dout . out)"); !s.ok()) return s;
    return DispatchHeadSize(hs, [&](auto padded) {
      constexpr int kHs = decltype(padded)::value;
      const dim3 grid = GridOf(batch, seq_len, num_heads);
      QueryGradKernel<T, kHs><<<grid, kRowsPerBlock, 0, stream>>>(dx, dy, x, lse, d, seq_len, channels, num_heads,
                                                                  scale);
      if (absl::Status s = CheckLaunch("AttentionBackward (dq)"); !s.ok()) return s;
      KeyValueGradKernel<T, kHs, false><<<grid, kRowsPerBlock, 0, stream>>>(dx, dy, x, lse, d, seq_len, channels,
                                                                            num_heads, scale);
      if (absl::Status s = CheckLaunch("AttentionBackward (dk)"); !s.ok()) return s;
      KeyValueGradKernel<T, kHs, true><<<grid, kRowsPerBlock, 0, stream>>>(dx, dy, x, lse, d, seq_len, channels,
                                                                           num_heads, scale);
      return CheckLaunch("AttentionBackward (dv)");
    });
  });
}

}  // namespace zeroshard::kernels::cuda

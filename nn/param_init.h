// Deterministic parameter initialisation from (seed, parameter name) alone.
//
// Element i of parameter `name` is a function of (seed, name, i) only: a
// counter-based generator (splitmix64 of a key derived from FNV-1a(name) and
// the seed, plus the element's pair index) feeds Box-Muller. The result is
// therefore independent of the data-parallel size, the unit layout, the rank
// and the order in which tensors are initialised, and any slice of a tensor
// can be initialised on its own (InitParamSlice) with the same values.
#ifndef ZEROSHARD_NN_PARAM_INIT_H_
#define ZEROSHARD_NN_PARAM_INIT_H_

#include <cstdint>

#include "nn/param_spec.h"

namespace zeroshard {

// A padded parameter (ParamSpec::logical_shape) gets 0 for every padding
// element and, for every real element, the value it has in the unpadded
// tensor of the logical shape (keyed by its logical index), so padding
// changes no real weight.

// Writes spec.numel() f32 values of the full tensor into out.
void InitParam(const ParamSpec& spec, uint64_t seed, float* out);

// Writes elements [begin, end) of the full tensor into out[0, end - begin);
// bitwise equal to the same range of InitParam's output.
// Precondition: 0 <= begin <= end <= spec.numel().
void InitParamSlice(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t end, float* out);

// Elements [begin, end) of tp rank tp_rank's LOCAL tensor (LocalShape,
// row-major) into out[0, end - begin): each element gets the value of the
// global element it is (LocalToGlobalRuns), so every tp layout starts from
// the same weights. Precondition: LocalShape(spec, tp_size) is OK and
// 0 <= begin <= end <= its numel.
void InitLocalParamSlice(const ParamSpec& spec, uint64_t seed, int tp_rank, int tp_size, int64_t begin, int64_t end,
                         float* out);

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_PARAM_INIT_H_

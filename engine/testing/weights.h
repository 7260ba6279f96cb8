// Comparing trained weights in engine tests: every parameter gathered whole
// by name, relative L2 distance, bitwise equality.
#ifndef ZEROSHARD_ENGINE_TESTING_WEIGHTS_H_
#define ZEROSHARD_ENGINE_TESTING_WEIGHTS_H_

#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace zeroshard {

using Weights = std::map<std::string, std::vector<float>>;

// Engine::GatherParam of every parameter (collective over the engine's
// ranks); a failed gather leaves its name out (and fails the test).
Weights GatherWeights(Engine& engine);

// sqrt(Σ (a - ref)² / Σ ref²) over every parameter of `ref`; infinity when
// `a` lacks one or has another size.
double RelativeL2(const Weights& a, const Weights& ref);

// The largest per-tensor relative L2 distance over the parameters of `ref`
// (sqrt(Σ (a - ref)² / Σ ref²) per tensor, absolute when ref is all zero),
// its name in *worst; infinity when `a` lacks one or has another size. For
// runs that differ only in summation order: Adam turns the rounding of a
// near-zero gradient element into a step of up to lr, so single elements
// may differ by far more than the tensor does.
double WorstTensorRelativeL2(const Weights& a, const Weights& ref, std::string* worst);

// Same names, sizes and bits, and not empty (a failed gather is never equal).
bool BitwiseEqual(const Weights& a, const Weights& b);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_WEIGHTS_H_

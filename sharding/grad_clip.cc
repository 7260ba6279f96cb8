#include "sharding/grad_clip.h"

#include <cmath>

namespace zeroshard {

double SumOfSquares(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

float ClipCoefficient(float total_norm, float max_norm) {
  if (max_norm <= 0) return 1.0f;
  if (!std::isfinite(total_norm)) return total_norm;  // propagate inf/NaN
  const float coeff = max_norm / (total_norm + 1e-6f);
  return coeff < 1.0f ? coeff : 1.0f;
}

}  // namespace zeroshard

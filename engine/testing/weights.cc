#include "engine/testing/weights.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "gtest/gtest.h"

namespace zeroshard {

Weights GatherWeights(Engine& engine) {
  Weights w;
  for (const std::string& name : engine.ParamNames()) {
    absl::StatusOr<std::vector<float>> v = engine.GatherParam(name);
    EXPECT_TRUE(v.ok()) << v.status();
    if (v.ok()) w[name] = std::move(*v);
  }
  return w;
}

double RelativeL2(const Weights& a, const Weights& ref) {
  double diff = 0, norm = 0;
  for (const auto& [name, r] : ref) {
    auto it = a.find(name);
    if (it == a.end() || it->second.size() != r.size()) return INFINITY;
    for (size_t i = 0; i < r.size(); ++i) {
      const double d = static_cast<double>(it->second[i]) - r[i];
      diff += d * d;
      norm += static_cast<double>(r[i]) * r[i];
    }
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

double WorstTensorRelativeL2(const Weights& a, const Weights& ref, std::string* worst) {
  double worst_value = 0;
  worst->clear();
  for (const auto& [name, r] : ref) {
    const double d = RelativeL2(a.count(name) ? Weights{{name, a.at(name)}} : Weights{}, {{name, r}});
    if (d > worst_value || worst->empty()) {
      worst_value = d;
      *worst = name;
    }
  }
  return worst_value;
}

bool BitwiseEqual(const Weights& a, const Weights& b) {
  if (a.empty() || a.size() != b.size()) return false;
  for (const auto& [name, v] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.size() != v.size()) return false;
    if (!v.empty() && std::memcmp(v.data(), it->second.data(), v.size() * sizeof(float)) != 0) return false;
  }
  return true;
}

}  // namespace zeroshard

#include "engine/pipeline_partition.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using Sizes = std::vector<int>;

double LargestChunk(const std::vector<double>& costs, const Sizes& sizes) {
  double largest = 0;
  int u = 0;
  for (int n : sizes) {
    double c = 0;
    for (int i = 0; i < n; ++i) c += costs[u++];
    largest = std::max(largest, c);
  }
  return largest;
}

// Every composition of n units into k non-empty chunks.
void Compositions(int n, int k, Sizes* prefix, const std::function<void(const Sizes&)>& visit) {
  if (k == 1) {
    prefix->push_back(n);
    visit(*prefix);
    prefix->pop_back();
    return;
  }
  for (int first = 1; first <= n - k + 1; ++first) {
    prefix->push_back(first);
    Compositions(n - first, k - 1, prefix, visit);
    prefix->pop_back();
  }
}

TEST(PipelinePartitionTest, SmallCases) {
  // Equal costs: two units more than chunks go to the last stages.
  EXPECT_EQ(PartitionByCost({1, 1, 1, 1, 1, 1}, 4), (Sizes{1, 1, 2, 2}));
  EXPECT_EQ(PartitionByCost({1, 1, 1, 1, 1, 1}, 3), (Sizes{2, 2, 2}));
  EXPECT_EQ(PartitionByCost({1, 1, 1, 1, 1, 1}, 1), (Sizes{6}));
  EXPECT_EQ(PartitionByCost({1, 1, 1}, 3), (Sizes{1, 1, 1}));
  // GPT-2 n_layer 4, n_embd 128, vocab 256, seq 64 by parameters read:
  // embed 40960, blocks 198272, head 256 + wte 32768. The embedding must
  // share a chunk with h.0, the head with h.3.
  EXPECT_EQ(PartitionByCost({40960, 198272, 198272, 198272, 198272, 33024}, 4), (Sizes{2, 1, 1, 2}));
  EXPECT_EQ(PartitionByCost({40960, 198272, 198272, 198272, 198272, 33024}, 2), (Sizes{3, 3}));
  // One expensive unit alone; the rest balanced around it.
  EXPECT_EQ(PartitionByCost({1, 1, 10, 1, 1, 1}, 3), (Sizes{2, 1, 3}));
  // Zero costs are allowed; every chunk still gets a unit.
  EXPECT_EQ(PartitionByCost({0, 0, 0, 0}, 2), (Sizes{1, 3}));
  EXPECT_EQ(PartitionByCost({0, 0, 0, 5}, 3), (Sizes{1, 1, 2}));
}

TEST(PipelinePartitionTest, InvalidInputsGiveNothing) {
  EXPECT_TRUE(PartitionByCost({1, 1}, 3).empty());
  EXPECT_TRUE(PartitionByCost({1, 1}, 0).empty());
  EXPECT_TRUE(PartitionByCost({}, 1).empty());
  EXPECT_TRUE(PartitionByCost({1, -1}, 1).empty());
  EXPECT_TRUE(PartitionByCost({1, std::nan("")}, 1).empty());
}

// Against every composition: the optimum, and among optimal ones the
// largest last chunk, then the one before it (reverse lexicographic).
TEST(PipelinePartitionTest, OptimalAndBackHeavyAgainstBruteForce) {
  const uint32_t seed = 20240611;
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9);
    const int k = 1 + static_cast<int>(rng() % n);
    std::vector<double> costs(n);
    for (double& c : costs) c = static_cast<double>(rng() % 7);  // small integers: many ties
    const Sizes got = PartitionByCost(costs, k);
    ASSERT_EQ(got.size(), static_cast<size_t>(k)) << "seed " << seed << " trial " << trial;
    int total = 0;
    for (int s : got) {
      EXPECT_GE(s, 1) << "seed " << seed << " trial " << trial;
      total += s;
    }
    EXPECT_EQ(total, n) << "seed " << seed << " trial " << trial;
    double optimum = 1e300;
    Sizes preferred;
    Sizes prefix;
    Compositions(n, k, &prefix, [&](const Sizes& sizes) {
      const double largest = LargestChunk(costs, sizes);
      const Sizes reversed(sizes.rbegin(), sizes.rend());
      const Sizes preferred_reversed(preferred.rbegin(), preferred.rend());
      if (largest < optimum || (largest == optimum && reversed > preferred_reversed)) {
        optimum = largest;
        preferred = sizes;
      }
    });
    EXPECT_EQ(LargestChunk(costs, got), optimum) << "seed " << seed << " trial " << trial;
    EXPECT_EQ(got, preferred) << "seed " << seed << " trial " << trial;
  }
}

}  // namespace
}  // namespace zeroshard

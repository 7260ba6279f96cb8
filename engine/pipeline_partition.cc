#include "engine/pipeline_partition.h"

#include <algorithm>
#include <limits>

namespace zeroshard {

std::vector<int> PartitionByCost(const std::vector<double>& unit_costs, int chunks) {
  const int n = static_cast<int>(unit_costs.size());
  if (chunks < 1 || chunks > n) return {};
  for (double c : unit_costs) {
    if (!(c >= 0)) return {};
  }
  // cost[l][r]: units [l, r), summed in index order so that every use of a
  // range sees the same value.
  std::vector<std::vector<double>> cost(n + 1, std::vector<double>(n + 1, 0));
  for (int l = 0; l < n; ++l) {
    for (int r = l + 1; r <= n; ++r) cost[l][r] = cost[l][r - 1] + unit_costs[r - 1];
  }
  // best[j][i]: the smallest largest-chunk cost of units [0, i) in j chunks.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(chunks + 1, std::vector<double>(n + 1, kInf));
  for (int i = 1; i <= n; ++i) best[1][i] = cost[0][i];
  for (int j = 2; j <= chunks; ++j) {
    for (int i = j; i <= n; ++i) {
      for (int l = j - 1; l < i; ++l) best[j][i] = std::min(best[j][i], std::max(best[j - 1][l], cost[l][i]));
    }
  }
  const double bound = best[chunks][n];
  // From the back, each chunk as long as the bound allows while the units
  // before it still fit in the chunks before it.
  std::vector<int> sizes(chunks, 0);
  int end = n;
  for (int j = chunks - 1; j >= 1; --j) {
    int begin = end - 1;
    for (int l = j; l < end; ++l) {
      if (cost[l][end] <= bound && best[j][l] <= bound) {
        begin = l;
        break;
      }
    }
    sizes[j] = end - begin;
    end = begin;
  }
  sizes[0] = end;
  return sizes;
}

}  // namespace zeroshard

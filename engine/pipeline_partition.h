// The automatic pipeline partition (docs/parallelism.md): the model's units
// cut into consecutive chunks so that the most expensive chunk costs as
// little as possible. A pure function; `zeroshard schedule` uses it when
// engine.parallel.pp_partition is empty.
#ifndef ZEROSHARD_ENGINE_PIPELINE_PARTITION_H_
#define ZEROSHARD_ENGINE_PIPELINE_PARTITION_H_

#include <vector>

namespace zeroshard {

// Units per chunk (chunk order, each >= 1, summing to unit_costs.size())
// minimising the largest chunk's cost, a chunk costing the sum of its
// units' costs. Among the partitions reaching that minimum, the last chunk
// is the largest possible, then the one before it, and so on: early stages
// keep the most micro-batches in flight under 1F1B, so they get the fewer
// units. Empty when chunks < 1, chunks > unit_costs.size(), or a cost is
// negative or NaN.
std::vector<int> PartitionByCost(const std::vector<double>& unit_costs, int chunks);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PIPELINE_PARTITION_H_

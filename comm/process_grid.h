// The dp × tp × pp process grid (docs/comm.md, Megatron's order).
//
// World rank = tp_rank + tp · (dp_rank + dp · pp_rank): tp varies fastest, so
// a tp group is tp consecutive ranks (neighbours on a host), then dp, then pp.
// A tp group fixes (dp_rank, pp_rank); a dp group fixes (tp_rank, pp_rank); a
// pp group fixes (tp_rank, dp_rank). Within a group, ranks are ordered by
// their coordinate along the group's axis, so group rank == that coordinate.
#ifndef ZEROSHARD_COMM_PROCESS_GRID_H_
#define ZEROSHARD_COMM_PROCESS_GRID_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"

namespace zeroshard {

struct GridShape {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  // Hybrid sharding: the dp group splits into dp / dp_shard shard groups of
  // dp_shard neighbouring dp ranks and dp_shard replica groups (ranks with
  // the same place in their shard group). 0 or dp: no split.
  int dp_shard = 0;
  int size() const { return dp * tp * pp; }
  // dp ranks per shard group: dp_shard, or dp when it is 0.
  int shard_group_size() const { return dp_shard > 0 ? dp_shard : dp; }
  bool hybrid() const { return shard_group_size() < dp; }
};

struct GridCoords {
  int dp = 0;
  int tp = 0;
  int pp = 0;
  bool operator==(const GridCoords& o) const { return dp == o.dp && tp == o.tp && pp == o.pp; }
};

enum class GridAxis { kDp, kTp, kPp };
const char* GridAxisName(GridAxis axis);  // "dp", "tp", "pp"

// Rank-layout arithmetic, usable without MPI. Preconditions: valid shape
// (ValidateGridShape), rank in [0, shape.size()).
GridCoords CoordsOfRank(const GridShape& shape, int rank);
int RankOfCoords(const GridShape& shape, const GridCoords& coords);
// Every group along `axis`, each listed by world rank in group-rank order;
// groups are ordered by their lowest world rank.
std::vector<std::vector<int>> GroupsAlong(const GridShape& shape, GridAxis axis);
// kInvalidArgument unless every dimension is >= 1, dp·tp·pp == world_size
// and dp_shard is 0 or divides dp.
absl::Status ValidateGridShape(const GridShape& shape, int world_size);

// Owns the world communicator and its dp, tp and pp sub-communicators, and
// for the world and every axis a *control* communicator: a duplicate of the
// same group over the world's backend (MPI, host memory) for fingerprints,
// batch signatures, error agreement, checkpoints and traces, so that the
// data communicators that move tensors can be device-side (NCCL) without
// control traffic passing through them. Movable; the communicators live as
// long as the grid.
class ProcessGrid {
 public:
  // Collective over `world`: splits it into the three groups (always in the
  // order tp, dp, pp), the embedding group, the shard and replica groups
  // (hybrid sharding only), then the control duplicates
  // (world, tp, dp, pp, embedding). Errors: the shape does not match world->size()
  // (kInvalidArgument), or a Split failed.
  static absl::StatusOr<ProcessGrid> Create(std::unique_ptr<Communicator> world, GridShape shape);
  // The same with the data communicators split from `data_world` (NCCL, or
  // device buffers staged over MPI) and the control ones from
  // `control_world` (MPI, host memory); both over the same ranks in the
  // same order. world() is the data world.
  static absl::StatusOr<ProcessGrid> Create(std::unique_ptr<Communicator> control_world,
                                            std::unique_ptr<Communicator> data_world, GridShape shape);

  Communicator& world() const { return *world_; }
  Communicator& dp() const { return *dp_; }
  Communicator& tp() const { return *tp_; }
  Communicator& pp() const { return *pp_; }
  Communicator& group(GridAxis axis) const;
  // Control communicators ("world.control", "dp.control", ...): the same
  // ranks in the same order as world() / group(axis).
  Communicator& world_control() const { return *world_control_; }
  Communicator& control(GridAxis axis) const;
  // The embedding group: the first and the last pipeline stage of this
  // rank's (dp, tp) coordinate (group rank = 0 for the first, 1 for the
  // last; one rank when pp = 1), for a weight the two stages share. On a
  // middle stage it is a group of one that nothing uses.
  Communicator& embedding() const { return *embedding_; }
  Communicator& embedding_control() const { return *embedding_control_; }
  // Hybrid sharding (shape().hybrid()): this rank's shard group ("dp.shard",
  // group rank = dp rank mod dp_shard) and replica group ("dp.replica",
  // group rank = dp rank / dp_shard). Without it the shard group is dp() and
  // there is no replica group (null).
  Communicator& dp_shard() const { return dp_shard_ != nullptr ? *dp_shard_ : *dp_; }
  Communicator* dp_replica() const { return dp_replica_.get(); }

  // The world ranks of one of this grid's data communicators (world, tp,
  // dp, pp, embedding, shard, replica), in group-rank order, from the
  // shape alone; empty for any other communicator.
  std::vector<int> WorldRanksOf(const Communicator* group) const;

  const GridShape& shape() const { return shape_; }
  const GridCoords& coords() const { return coords_; }
  int dp_rank() const { return coords_.dp; }
  int tp_rank() const { return coords_.tp; }
  int pp_rank() const { return coords_.pp; }

 private:
  ProcessGrid() = default;

  GridShape shape_;
  GridCoords coords_;
  // Sub-communicators are destroyed before the world they were split from.
  std::unique_ptr<Communicator> control_world_;  // only when the data world is another backend
  std::unique_ptr<Communicator> world_;
  std::unique_ptr<Communicator> tp_;
  std::unique_ptr<Communicator> dp_;
  std::unique_ptr<Communicator> pp_;
  std::unique_ptr<Communicator> embedding_;
  std::unique_ptr<Communicator> dp_shard_;
  std::unique_ptr<Communicator> dp_replica_;
  std::unique_ptr<Communicator> world_control_;
  std::unique_ptr<Communicator> tp_control_;
  std::unique_ptr<Communicator> dp_control_;
  std::unique_ptr<Communicator> pp_control_;
  std::unique_ptr<Communicator> embedding_control_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_PROCESS_GRID_H_

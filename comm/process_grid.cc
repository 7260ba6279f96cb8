#include "comm/process_grid.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// The coordinate along `axis`, and an id shared by the rank's group on it.
int CoordAlong(const GridCoords& c, GridAxis axis) {
  return axis == GridAxis::kDp ? c.dp : axis == GridAxis::kTp ? c.tp : c.pp;
}

int GroupColor(const GridShape& s, const GridCoords& c, GridAxis axis) {
  switch (axis) {
    case GridAxis::kTp:
      return c.dp + s.dp * c.pp;
    case GridAxis::kDp:
      return c.tp + s.tp * c.pp;
    case GridAxis::kPp:
      return c.tp + s.tp * c.dp;
  }
  return 0;
}

}  // namespace

const char* GridAxisName(GridAxis axis) {
  return axis == GridAxis::kDp ? "dp" : axis == GridAxis::kTp ? "tp" : "pp";
}

GridCoords CoordsOfRank(const GridShape& shape, int rank) {
  GridCoords c;
  c.tp = rank % shape.tp;
  c.dp = (rank / shape.tp) % shape.dp;
  c.pp = rank / (shape.tp * shape.dp);
  return c;
}

int RankOfCoords(const GridShape& shape, const GridCoords& c) { return c.tp + shape.tp * (c.dp + shape.dp * c.pp); }

std::vector<std::vector<int>> GroupsAlong(const GridShape& shape, GridAxis axis) {
  const int n = shape.size();
  const int group_size = axis == GridAxis::kDp ? shape.dp : axis == GridAxis::kTp ? shape.tp : shape.pp;
  std::vector<std::vector<int>> groups(n / group_size, std::vector<int>(group_size));
  // Colors are dense in [0, n / group_size) but not ordered by lowest rank;
  // map them in order of first appearance (ranks ascend).
  std::vector<int> slot_of_color(n / group_size, -1);
  int next = 0;
  for (int r = 0; r < n; ++r) {
    const GridCoords c = CoordsOfRank(shape, r);
    int& slot = slot_of_color[GroupColor(shape, c, axis)];
    if (slot < 0) slot = next++;
    groups[slot][CoordAlong(c, axis)] = r;
  }
  return groups;
}

absl::Status ValidateGridShape(const GridShape& shape, int world_size) {
  if (shape.dp < 1 || shape.tp < 1 || shape.pp < 1) {
    return absl::InvalidArgumentError(absl::StrCat("grid shape dp=", shape.dp, " tp=", shape.tp, " pp=", shape.pp,
                                                   " has a dimension < 1"));
  }
  if (static_cast<int64_t>(shape.dp) * shape.tp * shape.pp != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("grid shape dp=", shape.dp, " tp=", shape.tp, " pp=", shape.pp,
                                                   " needs ", static_cast<int64_t>(shape.dp) * shape.tp * shape.pp,
                                                   " ranks but the world has ", world_size));
  }
  if (shape.dp_shard < 0 || (shape.dp_shard > 0 && shape.dp % shape.dp_shard != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("grid shape dp_shard=", shape.dp_shard, " does not divide dp=",
                                                   shape.dp, "; expected 0 or a divisor of ", shape.dp));
  }
  return absl::OkStatus();
}

std::vector<int> ProcessGrid::WorldRanksOf(const Communicator* group) const {
  std::vector<int> ranks;
  const GridShape& s = shape_;
  const GridCoords& c = coords_;
  auto at = [&](int dp, int tp, int pp) { return RankOfCoords(s, GridCoords{dp, tp, pp}); };
  if (group == nullptr) return ranks;
  if (group == world_.get()) {
    for (int r = 0; r < s.size(); ++r) ranks.push_back(r);
  } else if (group == tp_.get()) {
    for (int t = 0; t < s.tp; ++t) ranks.push_back(at(c.dp, t, c.pp));
  } else if (group == dp_.get()) {
    for (int d = 0; d < s.dp; ++d) ranks.push_back(at(d, c.tp, c.pp));
  } else if (group == pp_.get()) {
    for (int p = 0; p < s.pp; ++p) ranks.push_back(at(c.dp, c.tp, p));
  } else if (group == embedding_.get()) {
    const bool end_stage = c.pp == 0 || c.pp == s.pp - 1;
    ranks.push_back(end_stage ? at(c.dp, c.tp, 0) : at(c.dp, c.tp, c.pp));
    if (end_stage && s.pp > 1) ranks.push_back(at(c.dp, c.tp, s.pp - 1));
  } else if (dp_shard_ != nullptr && group == dp_shard_.get()) {
    const int S = s.shard_group_size();
    for (int k = 0; k < S; ++k) ranks.push_back(at(c.dp / S * S + k, c.tp, c.pp));
  } else if (dp_replica_ != nullptr && group == dp_replica_.get()) {
    const int S = s.shard_group_size();
    for (int k = 0; k < s.dp / S; ++k) ranks.push_back(at(c.dp % S + k * S, c.tp, c.pp));
  }
  return ranks;
}

Communicator& ProcessGrid::group(GridAxis axis) const {
  return axis == GridAxis::kDp ? dp() : axis == GridAxis::kTp ? tp() : pp();
}

Communicator& ProcessGrid::control(GridAxis axis) const {
  return axis == GridAxis::kDp ? *dp_control_ : axis == GridAxis::kTp ? *tp_control_ : *pp_control_;
}

absl::StatusOr<ProcessGrid> ProcessGrid::Create(std::unique_ptr<Communicator> world, GridShape shape) {
  return Create(nullptr, std::move(world), shape);
}

absl::StatusOr<ProcessGrid> ProcessGrid::Create(std::unique_ptr<Communicator> control_world,
                                                std::unique_ptr<Communicator> data_world, GridShape shape) {
  if (data_world == nullptr) return absl::InvalidArgumentError("ProcessGrid::Create needs a world communicator");
  Communicator* control = control_world != nullptr ? control_world.get() : data_world.get();
  if (control->size() != data_world->size() || control->rank() != data_world->rank()) {
    return absl::InvalidArgumentError(absl::StrCat("ProcessGrid::Create: the control world '", control->name(),
                                                   "' is rank ", control->rank(), " of ", control->size(),
                                                   ", the data world '", data_world->name(), "' rank ",
                                                   data_world->rank(), " of ", data_world->size(),
                                                   "; expected the same ranks"));
  }
  Communicator* world = data_world.get();
  RETURN_IF_ERROR(ValidateGridShape(shape, world->size()));
  ProcessGrid grid;
  grid.shape_ = shape;
  grid.coords_ = CoordsOfRank(shape, world->rank());
  const GridCoords& c = grid.coords_;
  ASSIGN_OR_RETURN(grid.tp_, world->Split(GroupColor(shape, c, GridAxis::kTp), c.tp, "tp"));
  ASSIGN_OR_RETURN(grid.dp_, world->Split(GroupColor(shape, c, GridAxis::kDp), c.dp, "dp"));
  ASSIGN_OR_RETURN(grid.pp_, world->Split(GroupColor(shape, c, GridAxis::kPp), c.pp, "pp"));
  // The embedding group: the first and the last stage of one (dp, tp)
  // coordinate; a middle stage is a group of its own (it never uses it).
  const bool end_stage = c.pp == 0 || c.pp == shape.pp - 1;
  const int embed_color = end_stage ? GroupColor(shape, c, GridAxis::kPp) : shape.size() + world->rank();
  ASSIGN_OR_RETURN(grid.embedding_, world->Split(embed_color, c.pp, "embed"));
  if (shape.hybrid()) {
    const int S = shape.shard_group_size(), dp_color = GroupColor(shape, c, GridAxis::kDp);
    ASSIGN_OR_RETURN(grid.dp_shard_, world->Split(dp_color * (shape.dp / S) + c.dp / S, c.dp % S, "dp.shard"));
    ASSIGN_OR_RETURN(grid.dp_replica_, world->Split(dp_color * S + c.dp % S, c.dp / S, "dp.replica"));
  }
  ASSIGN_OR_RETURN(grid.world_control_, control->Split(0, control->rank(), "world.control"));
  ASSIGN_OR_RETURN(grid.tp_control_, control->Split(GroupColor(shape, c, GridAxis::kTp), c.tp, "tp.control"));
  ASSIGN_OR_RETURN(grid.dp_control_, control->Split(GroupColor(shape, c, GridAxis::kDp), c.dp, "dp.control"));
  ASSIGN_OR_RETURN(grid.pp_control_, control->Split(GroupColor(shape, c, GridAxis::kPp), c.pp, "pp.control"));
  ASSIGN_OR_RETURN(grid.embedding_control_, control->Split(embed_color, c.pp, "embed.control"));
  grid.control_world_ = std::move(control_world);
  grid.world_ = std::move(data_world);
  return grid;
}

}  // namespace zeroshard

#include "engine/shard_group.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

absl::StatusOr<int> PerHostShardGroupSize(const EngineConfig& config, const HostTopology& hosts) {
  const ParallelConfig& par = config.parallel();
  const int r = hosts.ranks_per_host();
  if (r == 0) {
    std::vector<std::string> counts;
    for (int h = 0; h < hosts.hosts(); ++h) {
      counts.push_back(absl::StrCat("host ", h, " (", hosts.host_names[h], ") ", hosts.ranks_on_host[h]));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "engine.zero.shard_group: PER_HOST needs the same number of ranks on every host; ranks per host: ",
        absl::StrJoin(counts, ", "), "; use SIZE with engine.zero.shard_group_size"));
  }
  if (!hosts.placed_in_blocks()) {
    for (size_t rank = 0; rank < hosts.host_of_rank.size(); ++rank) {
      if (hosts.host_of_rank[rank] != static_cast<int>(rank) / r) {
        return absl::FailedPreconditionError(absl::StrCat(
            "engine.zero.shard_group: PER_HOST needs world ranks placed in blocks of ", r, " per host; world rank ",
            rank, " runs on host ", hosts.host_of_rank[rank], " (", hosts.host_names[hosts.host_of_rank[rank]],
            "), expected host ", rank / r, "; launch with mpirun --map-by slot"));
      }
    }
  }
  const int tp = par.tp() > 0 ? par.tp() : 1;
  const int stage_ranks = par.dp() * tp;
  if (r % tp != 0 || stage_ranks % r != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "engine.zero.shard_group: PER_HOST with ", r, " ranks per host needs them to hold whole tp groups (tp ", tp,
        ") of one pipeline stage (dp*tp = ", stage_ranks, "); expected ranks per host to be a multiple of tp and to "
        "divide dp*tp"));
  }
  return r / tp;
}

absl::Status ResolveShardGroup(const HostTopology& hosts, EngineConfig* config) {
  ZeroConfig* zero = config->mutable_zero();
  if (zero->shard_group() != ZeroConfig::PER_HOST) return absl::OkStatus();
  absl::StatusOr<int> size = PerHostShardGroupSize(*config, hosts);
  if (!size.ok()) return size.status();
  zero->clear_shard_group();
  if (*size < config->parallel().dp()) {
    zero->set_shard_group_size(*size);
  } else {
    zero->clear_shard_group_size();
  }
  return absl::OkStatus();
}

}  // namespace zeroshard

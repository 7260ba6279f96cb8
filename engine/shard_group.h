// engine.zero.shard_group: PER_HOST resolved against the launch's hosts.
#ifndef ZEROSHARD_ENGINE_SHARD_GROUP_H_
#define ZEROSHARD_ENGINE_SHARD_GROUP_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/host_topology.h"
#include "proto/engine_config.pb.h"

namespace zeroshard {

// The shard group size (in dp ranks) that PER_HOST gives on `hosts`: the dp
// ranks of one host, ranks_per_host / tp. kFailedPrecondition naming the
// hosts when they run different numbers of ranks, when the ranks are not
// placed in blocks, or when a host's ranks do not hold whole tp groups of one
// pipeline stage.
absl::StatusOr<int> PerHostShardGroupSize(const EngineConfig& config, const HostTopology& hosts);

// SIZE: leaves `config` as it is. PER_HOST: rewrites it into the equivalent
// SIZE config (shard_group_size = PerHostShardGroupSize, or 0 when that is
// all of dp), so the grid, the engine and the checkpoint see one resolved
// size. Call on every rank with the same topology.
absl::Status ResolveShardGroup(const HostTopology& hosts, EngineConfig* config);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_SHARD_GROUP_H_

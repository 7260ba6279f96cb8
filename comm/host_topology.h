// Which host each world rank runs on, learned at launch from the ranks that
// share memory (MPI_COMM_TYPE_SHARED): under mpirun one node per daemon.
#ifndef ZEROSHARD_COMM_HOST_TOPOLOGY_H_
#define ZEROSHARD_COMM_HOST_TOPOLOGY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/launch_environment.h"

namespace zeroshard {

struct HostTopology {
  // host_of_rank[r]: world rank r's host index. Hosts are numbered in the
  // order of their lowest world rank, so every rank computes the same table.
  std::vector<int> host_of_rank;
  // ranks_on_host[h]: how many world ranks host h runs.
  std::vector<int> ranks_on_host;
  // host_names[h]: MPI_Get_processor_name of host h's lowest rank (under
  // srun its SLURMD_NODENAME).
  std::vector<std::string> host_names;

  int hosts() const { return static_cast<int>(ranks_on_host.size()); }
  // Ranks per host when every host runs the same number; 0 when uneven.
  int ranks_per_host() const;
  // Whether host h holds world ranks [h*R, (h+1)*R) for R = ranks_per_host().
  bool placed_in_blocks() const;
  // "hosts 2 x 2 ranks", or "hosts 2 (uneven: 3, 1 ranks)".
  std::string Describe() const;
};

// The table for ranks whose host is named by a key every rank of that host
// shares and no other host has (the host's lowest world rank, in
// DetectHostTopology); names[r] is rank r's processor name.
HostTopology HostTopologyFromKeys(const std::vector<int>& key_of_rank, const std::vector<std::string>& names);

// Collective over MPI_COMM_WORLD (MPI must be initialised). Also records the
// table for DetectedHostName. Under srun (`launch`, read from the process
// environment by the first form) a host is named by Slurm's node name
// (SLURMD_NODENAME, what sinfo and scontrol call it), and a world that is not
// the step's task count is refused (CheckWorldMatchesLauncher), as is a
// malformed srun environment (ReadLaunchEnvironment), on every rank
// together: a rank whose check passed returns a relayed error naming the
// lowest rank whose check failed (comm/status_agreement.h).
absl::StatusOr<HostTopology> DetectHostTopology();
absl::StatusOr<HostTopology> DetectHostTopology(const LaunchEnvironment& launch);

// World rank r's host name from this process's last DetectHostTopology; ""
// before it ran or for a rank outside the table. Thread-safe (the watchdog
// names hosts with it).
std::string DetectedHostName(int world_rank);

// Whether the world ranks `group` (a communicator's members) run on more
// than one host of `topology`. A rank outside the table counts as a host of
// its own.
bool SpansHosts(const HostTopology& topology, const std::vector<int>& group);

// Inter-host bytes: the sum of `bytes_sent[g]` over the groups g whose
// members (`members[g]`, world ranks) span hosts; a group with no members
// listed is counted whenever there is more than one host. The backend's
// algorithm decides which peer each byte goes to, so this is every byte
// (comm/comm_stats.h's ring volume) of collectives that may cross: an upper
// bound on the rank's link traffic (docs/metrics.md).
int64_t InterHostBytesSent(const HostTopology& topology, const std::map<std::string, int64_t>& bytes_sent,
                           const std::map<std::string, std::vector<int>>& members);

// "" when every group of `tp` neighbouring world ranks runs on one host; else
// a warning naming the first tp group that spans hosts.
std::string TpSpansHostsWarning(const HostTopology& topology, int tp);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_HOST_TOPOLOGY_H_

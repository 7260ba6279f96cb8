#include "comm/host_topology.h"

#include <mpi.h>

#include <cstring>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "comm/mpi_env.h"
#include "comm/status_agreement.h"
#include "core/status_macros.h"

namespace zeroshard {

namespace {

absl::Mutex detected_mu(absl::kConstInit);
// Host name of each world rank, from the last DetectHostTopology.
std::vector<std::string>* detected_names ABSL_GUARDED_BY(detected_mu) = nullptr;

}  // namespace

int HostTopology::ranks_per_host() const {
  if (ranks_on_host.empty()) return 0;
  const int r = ranks_on_host[0];
  for (int n : ranks_on_host) {
    if (n != r) return 0;
  }
  return r;
}

bool HostTopology::placed_in_blocks() const {
  const int r = ranks_per_host();
  if (r == 0) return false;
  for (size_t rank = 0; rank < host_of_rank.size(); ++rank) {
    if (host_of_rank[rank] != static_cast<int>(rank) / r) return false;
  }
  return true;
}

std::string HostTopology::Describe() const {
  if (ranks_per_host() > 0) return absl::StrCat("hosts ", hosts(), " x ", ranks_per_host(), " ranks");
  return absl::StrCat("hosts ", hosts(), " (uneven: ", absl::StrJoin(ranks_on_host, ", "), " ranks)");
}

HostTopology HostTopologyFromKeys(const std::vector<int>& key_of_rank, const std::vector<std::string>& names) {
  HostTopology t;
  std::map<int, int> host_of_key;  // in order of first appearance by rank
  t.host_of_rank.resize(key_of_rank.size());
  for (size_t r = 0; r < key_of_rank.size(); ++r) {
    auto [it, inserted] = host_of_key.try_emplace(key_of_rank[r], t.hosts());
    if (inserted) {
      t.ranks_on_host.push_back(0);
      t.host_names.push_back(r < names.size() ? names[r] : "");
    }
    t.host_of_rank[r] = it->second;
    ++t.ranks_on_host[it->second];
  }
  return t;
}

namespace {

// Collective: `local` on a rank whose launcher environment is wrong, a
// relayed error naming the lowest such rank on the others, OK when none is
// (so no rank goes on to a collective that another never joins).
absl::Status AgreeOnLaunch(const absl::Status& local, int rank) {
  const int none = std::numeric_limits<int>::max();
  int mine = local.ok() ? none : rank, lowest = none;
  RETURN_IF_ERROR(MpiStatus(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
                            "MPI_Allreduce of the launcher checks"));
  if (!local.ok() || lowest == none) return local;
  return RelayedError(absl::StatusCode::kFailedPrecondition,
                      absl::StrCat("the launcher's environment is wrong on world rank ", lowest,
                                   " (see its error); this rank (", rank, ") was fine"));
}

absl::StatusOr<HostTopology> Detect(const absl::StatusOr<LaunchEnvironment>& read) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  RETURN_IF_ERROR(AgreeOnLaunch(read.ok() ? CheckWorldMatchesLauncher(*read, rank, size) : read.status(), rank));
  const LaunchEnvironment& launch = *read;
  MPI_Comm node = MPI_COMM_NULL;
  // Keyed by world rank: the node's rank 0 is its lowest world rank.
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
                            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) for the host topology"));
  int key = rank;
  absl::Status st = MpiStatus(MPI_Bcast(&key, 1, MPI_INT, 0, node), "MPI_Bcast of the host key");
  MPI_Comm_free(&node);
  RETURN_IF_ERROR(st);
  std::vector<int> keys(size);
  RETURN_IF_ERROR(MpiStatus(MPI_Allgather(&key, 1, MPI_INT, keys.data(), 1, MPI_INT, MPI_COMM_WORLD),
                            "MPI_Allgather of the host keys"));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  if (launch.launcher == Launcher::kSrun) {
    launch.node.copy(name, MPI_MAX_PROCESSOR_NAME - 1);
  } else {
    MPI_Get_processor_name(name, &len);
  }
  std::vector<char> all(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  RETURN_IF_ERROR(MpiStatus(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                                          MPI_CHAR, MPI_COMM_WORLD),
                            "MPI_Allgather of the processor names"));
  std::vector<std::string> names(size);
  for (int r = 0; r < size; ++r) {
    const char* p = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    names[r] = std::string(p, strnlen(p, MPI_MAX_PROCESSOR_NAME));
  }
  HostTopology topology = HostTopologyFromKeys(keys, names);
  {
    absl::MutexLock lock(&detected_mu);
    if (detected_names == nullptr) detected_names = new std::vector<std::string>();
    detected_names->clear();
    for (int r = 0; r < size; ++r) detected_names->push_back(topology.host_names[topology.host_of_rank[r]]);
  }
  return topology;
}

}  // namespace

absl::StatusOr<HostTopology> DetectHostTopology() { return Detect(ReadLaunchEnvironment()); }

absl::StatusOr<HostTopology> DetectHostTopology(const LaunchEnvironment& launch) { return Detect(launch); }

std::string DetectedHostName(int world_rank) {
  absl::MutexLock lock(&detected_mu);
  if (detected_names == nullptr || world_rank < 0 || world_rank >= static_cast<int>(detected_names->size())) return "";
  return (*detected_names)[world_rank];
}

bool SpansHosts(const HostTopology& topology, const std::vector<int>& group) {
  auto host = [&](int r) {
    return r >= 0 && r < static_cast<int>(topology.host_of_rank.size()) ? topology.host_of_rank[r] : -1 - r;
  };
  for (int r : group) {
    if (host(r) != host(group.front())) return true;
  }
  return false;
}

int64_t InterHostBytesSent(const HostTopology& topology, const std::map<std::string, int64_t>& bytes_sent,
                           const std::map<std::string, std::vector<int>>& members) {
  int64_t total = 0;
  for (const auto& [group, bytes] : bytes_sent) {
    const auto it = members.find(group);
    const bool crosses = it == members.end() || it->second.empty() ? topology.hosts() > 1
                                                                   : SpansHosts(topology, it->second);
    if (crosses) total += bytes;
  }
  return total;
}

std::string TpSpansHostsWarning(const HostTopology& topology, int tp) {
  const int n = static_cast<int>(topology.host_of_rank.size());
  if (tp <= 1) return "";
  for (int first = 0; first + tp <= n; first += tp) {
    const int a = topology.host_of_rank[first];
    int b = a;
    for (int r = first; r < first + tp && b == a; ++r) b = topology.host_of_rank[r];
    if (b != a) {
      return absl::StrCat("tp group of world ranks ", first, "..", first + tp - 1, " spans hosts ", a, " (",
                          topology.host_names[a], ") and ", b, " (", topology.host_names[b],
                          "): its collectives cross the network; place ranks in blocks of a multiple of tp per "
                          "host (", topology.Describe(), ")");
    }
  }
  return "";
}

}  // namespace zeroshard

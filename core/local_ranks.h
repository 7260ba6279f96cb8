#ifndef ZEROSHARD_CORE_LOCAL_RANKS_H_
#define ZEROSHARD_CORE_LOCAL_RANKS_H_

#include <optional>
#include <string>

namespace zeroshard {

// Ranks of this job on this process's host, as the launcher wrote them into
// the environment, or nullopt when no launcher variable says:
//   mpirun: OMPI_COMM_WORLD_LOCAL_SIZE (MPICH, Intel MPI: MPI_LOCALNRANKS);
//   srun:   SLURM_STEP_TASKS_PER_NODE's entry for SLURM_NODEID (srun sets no
//           local size; the step's list holds every node's count), else the
//           leading count of SLURM_NTASKS_PER_NODE.
// Read before MPI is up (thread counts, the memory limit), so it cannot ask MPI.
std::optional<int> LocalRanksFromEnvironment();

// The count for node `node` in Slurm's compressed per-node list ("2(x3),1":
// nodes 0-2 run 2 tasks, node 3 runs 1); nullopt for a malformed list or a
// node outside it.
std::optional<int> SlurmTasksOnNode(const std::string& tasks_per_node, int node);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_LOCAL_RANKS_H_

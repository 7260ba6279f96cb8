// Lets a timed-out rank ask the other ranks of its group which collective
// they last started, without comm.debug_checks.
//
// Each MPI communicator owns a probe: a private duplicate of its group and an
// atomic "last started sequence number" that the communicator's executor
// stores as it starts each collective (one relaxed store: the probe's only
// cost on the issue/execute path). One listener thread per process serves every live
// probe: every 20 ms it MPI_Iprobes each probe's duplicate for queries and
// answers each with that probe's number (nonblocking sends; it never blocks
// in a receive, so it costs nothing measurable on an oversubscribed node).
// The thread starts with the first probe and is joined when the last probe is
// destroyed or at MPI_Finalize (a delete callback on MPI_COMM_SELF),
// whichever comes first.
//
// The watchdog asks (QueryStarted) only when it is about to abort the job, so
// one query per process is the expected use; a reply that arrives after its
// query gave up could be matched by a later query on the same probe.
#ifndef ZEROSHARD_COMM_ARRIVAL_PROBE_H_
#define ZEROSHARD_COMM_ARRIVAL_PROBE_H_

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zeroshard {

// How long the watchdog waits for every answer: timeout/4 clamped to
// [200 ms, 2 s]. The listener answers within ~20 ms plus scheduling, so a
// rank silent this long is dead or stopped; a quarter of the timeout keeps
// the abort near 1.3 × the timeout even then (relatively later below 0.8 s,
// where the 200 ms floor applies).
absl::Duration ArrivalQueryBound(absl::Duration timeout);

class ArrivalProbe {
 public:
  // Duplicates `group` (collective over it); the probe frees its duplicate.
  // Starts the process's listener thread if no other probe runs it.
  static absl::StatusOr<std::unique_ptr<ArrivalProbe>> Create(MPI_Comm group);
  // Stops answering for this group (and joins the listener if it was the last
  // probe). Safe after MPI_Finalize.
  ~ArrivalProbe();
  ArrivalProbe(const ArrivalProbe&) = delete;
  ArrivalProbe& operator=(const ArrivalProbe&) = delete;

  // Collective `seq` (numbered from 1) has started on this rank. Any thread.
  void RecordStarted(int64_t seq);

  // Asks every other rank of the group for its last started sequence number
  // (0: none yet) and waits for the answers up to `bound`. Entry r is rank
  // r's answer, this rank's own number for r == rank(); nullopt where rank r
  // did not answer in time (or MPI failed to reach it). One caller at a time.
  std::vector<std::optional<int64_t>> QueryStarted(absl::Duration bound);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // What the listener serves; the listener reads `started`, the owner writes it.
  struct Served {
    MPI_Comm comm = MPI_COMM_NULL;
    std::atomic<int64_t> started{0};
  };

 private:
  ArrivalProbe(MPI_Comm comm, int rank, int size);

  Served served_;
  const int rank_;
  const int size_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_ARRIVAL_PROBE_H_

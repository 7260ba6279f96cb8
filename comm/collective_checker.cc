#include "comm/collective_checker.h"

#include <sched.h>

#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "comm/mpi_env.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<CollectiveChecker>> CollectiveChecker::Create(MPI_Comm group, std::string name) {
  ASSIGN_OR_RETURN(DuplicatedComm dup, DuplicateComm(group, "the collective checker"));
  return std::unique_ptr<CollectiveChecker>(new CollectiveChecker(dup.comm, std::move(name), dup.rank, dup.size));
}

CollectiveChecker::~CollectiveChecker() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

absl::Status CollectiveChecker::Check(const CollectiveFingerprint& mine, CollectiveWatchdog* watchdog) {
  constexpr int kW = CollectiveFingerprint::kWords;
  const auto words = mine.Encode();
  std::vector<int64_t> all(static_cast<size_t>(size_) * kW);
  std::copy(words.begin(), words.end(), all.begin() + rank_ * kW);
  if (watchdog) watchdog->MarkArrived(rank_);

  std::vector<MPI_Request> recvs, sends;
  std::vector<int> recv_rank;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    recvs.emplace_back();
    recv_rank.push_back(r);
    RETURN_IF_ERROR(MpiStatus(MPI_Irecv(all.data() + r * kW, kW, MPI_INT64_T, r, 0, comm_, &recvs.back()),
                              "MPI_Irecv of a collective fingerprint"));
    sends.emplace_back();
    RETURN_IF_ERROR(MpiStatus(MPI_Isend(words.data(), kW, MPI_INT64_T, r, 0, comm_, &sends.back()),
                              "MPI_Isend of a collective fingerprint"));
  }
  // Poll with a growing pause: this rank may wait long for a late peer, and
  // on an oversubscribed node a spinning waiter slows that peer down.
  int pending = static_cast<int>(recvs.size());
  std::vector<int> done_idx(recvs.size());
  absl::Duration pause = absl::Microseconds(1);
  while (pending > 0) {
    int outcount = 0;
    RETURN_IF_ERROR(MpiStatus(MPI_Testsome(static_cast<int>(recvs.size()), recvs.data(), &outcount,
                                           done_idx.data(), MPI_STATUSES_IGNORE),
                              "MPI_Testsome on collective fingerprints"));
    if (outcount > 0 && outcount != MPI_UNDEFINED) {
      for (int i = 0; i < outcount; ++i) {
        if (watchdog) watchdog->MarkArrived(recv_rank[done_idx[i]]);
      }
      pending -= outcount;
      pause = absl::Microseconds(1);
      continue;
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(1));
  }
  RETURN_IF_ERROR(MpiStatus(MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE),
                            "MPI_Waitall on collective fingerprint sends"));
  if (watchdog) watchdog->ArrivalsComplete();

  std::vector<CollectiveFingerprint> fps(size_);
  for (int r = 0; r < size_; ++r) fps[r] = CollectiveFingerprint::Decode(all.data() + r * kW);
  if (auto mismatch = DescribeMismatch(name_, fps)) return absl::FailedPreconditionError(*mismatch);
  return absl::OkStatus();
}

}  // namespace zeroshard

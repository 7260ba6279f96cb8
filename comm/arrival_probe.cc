#include "comm/arrival_probe.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "comm/mpi_env.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// Tags on a probe's private duplicate (no other traffic shares it).
constexpr int kQueryTag = 1;  // empty message: "what did you last start?"
constexpr int kReplyTag = 2;  // one int64: the answer
// How often the listener looks for queries, and the querier for replies.
constexpr absl::Duration kListenerPeriod = absl::Milliseconds(20);
constexpr absl::Duration kQueryPoll = absl::Milliseconds(5);

// The process's one listener thread and the probes it serves.
//
// Locking: lifecycle_mu_ serialises Add/Remove/Shutdown (held across the
// thread's start and join); mu_ guards the probe list and is held by the
// thread for each pass, so a removed probe is never touched again.
class Listener {
 public:
  static Listener& Get() {
    static Listener* listener = new Listener;  // never destroyed: threads may outlive statics
    return *listener;
  }

  void Add(ArrivalProbe::Served* served) {
    absl::MutexLock life(&lifecycle_mu_);
    if (finalized_) return;
    RegisterFinalizeHookOnce();
    absl::MutexLock lock(&mu_);
    probes_.push_back(served);
    if (!thread_.joinable()) {
      stop_ = false;
      thread_ = std::thread([this] { Loop(); });
    }
  }

  void Remove(ArrivalProbe::Served* served) {
    absl::MutexLock life(&lifecycle_mu_);
    bool last = false;
    {
      absl::MutexLock lock(&mu_);
      probes_.erase(std::remove(probes_.begin(), probes_.end(), served), probes_.end());
      last = probes_.empty();
    }
    if (last) StopThread();
  }

  // MPI_Finalize is running: stop for good (MPI is still usable here).
  void Shutdown() {
    absl::MutexLock life(&lifecycle_mu_);
    finalized_ = true;
    StopThread();
  }

 private:
  struct Reply {
    MPI_Request request;
    std::unique_ptr<int64_t> value;  // the send buffer
  };

  void StopThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_) {
    if (!thread_.joinable()) return;
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  void Loop() {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      for (ArrivalProbe::Served* served : probes_) Serve(*served);
      TestReplies();
      mu_.AwaitWithTimeout(absl::Condition(&stop_), kListenerPeriod);
    }
    TestReplies();
    // A reply still in flight (its querier died) is released; MPI may still
    // read its buffer, so the buffer is kept for the life of the process.
    for (Reply& r : replies_) {
      MPI_Request_free(&r.request);
      orphans_.push_back(std::move(r.value));
    }
    replies_.clear();
  }

  void Serve(ArrivalProbe::Served& served) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (true) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, served.comm, &flag, &status) != MPI_SUCCESS || !flag) return;
      const int peer = status.MPI_SOURCE;
      // Only this thread receives kQueryTag on this communicator, so the
      // probed message is the one received.
      if (MPI_Recv(nullptr, 0, MPI_BYTE, peer, kQueryTag, served.comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
      Reply reply{MPI_REQUEST_NULL, std::make_unique<int64_t>(served.started.load(std::memory_order_relaxed))};
      if (MPI_Isend(reply.value.get(), 1, MPI_INT64_T, peer, kReplyTag, served.comm, &reply.request) == MPI_SUCCESS) {
        replies_.push_back(std::move(reply));
      }
    }
  }

  void TestReplies() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < replies_.size();) {
      int done = 0;
      if (MPI_Test(&replies_[i].request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) {
        replies_.erase(replies_.begin() + i);
      } else {
        ++i;
      }
    }
  }

  // MPI_Finalize frees MPI_COMM_SELF's attributes first, while MPI is still
  // usable: the delete callback stops the thread before MPI goes away.
  void RegisterFinalizeHookOnce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_) {
    if (hook_registered_) return;
    int keyval = MPI_KEYVAL_INVALID;
    auto on_finalize = [](MPI_Comm, int, void*, void*) {
      Listener::Get().Shutdown();
      return MPI_SUCCESS;
    };
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &keyval, nullptr) == MPI_SUCCESS &&
        MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr) == MPI_SUCCESS) {
      hook_registered_ = true;
    }
  }

  absl::Mutex lifecycle_mu_;
  bool finalized_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  bool hook_registered_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(lifecycle_mu_);

  absl::Mutex mu_ ABSL_ACQUIRED_AFTER(lifecycle_mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ArrivalProbe::Served*> probes_ ABSL_GUARDED_BY(mu_);
  std::vector<Reply> replies_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<int64_t>> orphans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Duration ArrivalQueryBound(absl::Duration timeout) {
  return std::clamp(timeout / 4, absl::Milliseconds(200), absl::Seconds(2));
}

absl::StatusOr<std::unique_ptr<ArrivalProbe>> ArrivalProbe::Create(MPI_Comm group) {
  ASSIGN_OR_RETURN(DuplicatedComm dup, DuplicateComm(group, "the arrival probe"));
  return std::unique_ptr<ArrivalProbe>(new ArrivalProbe(dup.comm, dup.rank, dup.size));
}

ArrivalProbe::ArrivalProbe(MPI_Comm comm, int rank, int size) : rank_(rank), size_(size) {
  served_.comm = comm;
  Listener::Get().Add(&served_);
}

ArrivalProbe::~ArrivalProbe() {
  Listener::Get().Remove(&served_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&served_.comm);
}

void ArrivalProbe::RecordStarted(int64_t seq) { served_.started.store(seq, std::memory_order_relaxed); }

std::vector<std::optional<int64_t>> ArrivalProbe::QueryStarted(absl::Duration bound) {
  std::vector<std::optional<int64_t>> started(size_);
  started[rank_] = served_.started.load(std::memory_order_relaxed);
  std::vector<int64_t> answers(size_, 0);
  std::vector<MPI_Request> recvs;
  std::vector<int> recv_rank;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
    if (MPI_Irecv(&answers[r], 1, MPI_INT64_T, r, kReplyTag, served_.comm, &recv) != MPI_SUCCESS) continue;
    if (MPI_Isend(nullptr, 0, MPI_BYTE, r, kQueryTag, served_.comm, &send) != MPI_SUCCESS) {
      MPI_Cancel(&recv);
      MPI_Wait(&recv, MPI_STATUS_IGNORE);
      continue;
    }
    MPI_Request_free(&send);  // empty: no buffer to keep alive
    recvs.push_back(recv);
    recv_rank.push_back(r);
  }
  // Poll, never block: a dead peer must not hold this thread past `bound`.
  const absl::Time deadline = absl::Now() + bound;
  std::vector<int> done(recvs.size());
  int pending = static_cast<int>(recvs.size());
  while (pending > 0) {
    int outcount = 0;
    if (MPI_Testsome(static_cast<int>(recvs.size()), recvs.data(), &outcount, done.data(), MPI_STATUSES_IGNORE) !=
        MPI_SUCCESS) {
      break;
    }
    if (outcount == MPI_UNDEFINED) break;
    for (int i = 0; i < outcount; ++i) started[recv_rank[done[i]]] = answers[recv_rank[done[i]]];
    pending -= outcount;
    if (pending == 0 || absl::Now() >= deadline) break;
    if (outcount == 0) absl::SleepFor(kQueryPoll);
  }
  // Withdraw the receives still open; one that matched meanwhile still counts.
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (recvs[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&recvs[i]);
    MPI_Status status;
    MPI_Wait(&recvs[i], &status);
    int cancelled = 0;
    MPI_Test_cancelled(&status, &cancelled);
    if (!cancelled) started[recv_rank[i]] = answers[recv_rank[i]];
  }
  return started;
}

}  // namespace zeroshard

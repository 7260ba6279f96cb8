// ThreadCommunicator: an in-process Communicator whose ranks are threads, for
// single-binary sharding and engine tests (no MPI, deterministic, seconds).
//
// Collectives rendezvous at issue time: the call blocks until every rank of
// the group has issued it, computes this rank's result (sums in rank order, so
// results are bitwise repeatable), waits for every rank to finish reading,
// and returns an already completed Work. That is a valid schedule of the
// Communicator contract (same collectives in the same order on every rank);
// it simply overlaps nothing. AllGather and AllToAll (any dtype),
// ReduceScatter and AllReduce (f32 and i32), Barrier. Other calls return
// kUnimplemented.
//
// Stats follow comm/comm_stats.h, so tests can assert bytes exactly.
#ifndef ZEROSHARD_SHARDING_TESTING_THREAD_COMMUNICATOR_H_
#define ZEROSHARD_SHARDING_TESTING_THREAD_COMMUNICATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace zeroshard {

class ThreadGroupState;

// Creates `size` communicators sharing one group; give communicator r to the
// thread playing rank r. They must all be destroyed before the group state
// (the communicators keep it alive through a shared_ptr).
std::vector<std::unique_ptr<Communicator>> CreateThreadGroup(int size, const std::string& name = "dp");

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_TESTING_THREAD_COMMUNICATOR_H_

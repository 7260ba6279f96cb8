// What a rank says about the collective it is about to run, and the message
// that names the ranks when they disagree (comm.debug_checks).
//
// Pure data and string formatting: the exchange itself lives in
// collective_checker.h. Every rank builds the same message from the same
// fingerprints, so all ranks fail with identical text.
#ifndef ZEROSHARD_COMM_FINGERPRINT_H_
#define ZEROSHARD_COMM_FINGERPRINT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm_stats.h"
#include "comm/communicator.h"
#include "core/dtype.h"

namespace zeroshard {

struct CollectiveFingerprint {
  int64_t seq = 0;  // 1 for the communicator's first collective
  CommOp op = CommOp::kBarrier;
  int64_t count = 0;  // elements per rank (AllToAll: per block), as the caller passed it
  DType dtype = DType::kF32;
  int root = -1;  // Broadcast only; -1 otherwise
  ReduceOp reduce_op = ReduceOp::kSum;  // reductions only

  bool operator==(const CollectiveFingerprint& o) const;
  bool operator!=(const CollectiveFingerprint& o) const { return !(*this == o); }

  // The wire form: six int64 values.
  static constexpr int kWords = 6;
  std::array<int64_t, kWords> Encode() const;
  static CollectiveFingerprint Decode(const int64_t* words);
};

// "AllReduce(f32, 1024)", "AllReduce(bf16, 8, max)" (the reduce op is shown
// unless it is sum), "Broadcast(i32, 4, root 2)", "Barrier()", "Split()".
std::string DescribeCollective(const CollectiveFingerprint& fp);

// nullopt when every rank's fingerprint is equal. Otherwise, with fps[r] the
// fingerprint of rank r:
//   "collective #118 mismatch in group dp: ranks 0,2,3 called
//    ReduceScatter(f32, 4096), rank 1 called AllGather(f32, 1024)"
// The number is rank 0's sequence number; a rank at another sequence number
// is described as "... called #117 AllGather(f32, 1024)". Groups of equal
// fingerprints are listed by their lowest rank.
std::optional<std::string> DescribeMismatch(const std::string& group,
                                            const std::vector<CollectiveFingerprint>& fps);

// "0,2,3" (the list form messages use).
std::string JoinRanks(const std::vector<int>& ranks);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_FINGERPRINT_H_

// Per-communicator counters of calls and bytes, per collective kind.
//
// Bytes are what a bandwidth-optimal (ring) algorithm moves per rank, so they
// do not depend on which algorithm the backend picked and they match the
// per-step communication volumes in docs/sharding.md and the busbw of
// nccl-tests. With n = group size and B = the op's buffer bytes (see
// CommStats::Record):
//   AllGather, ReduceScatter: sent = received = (n-1)/n · B_total
//   AllToAll:                 sent = received = (n-1)/n · B_total, B_total =
//                             the input (n blocks); the own block stays put
//   AllReduce:                sent = received = 2(n-1)/n · B
//   Broadcast:                root sends B, every other rank receives B
//   Send / Recv:              B sent / B received
//   Barrier, Split:           calls only
// A group of one moves nothing.
#ifndef ZEROSHARD_COMM_COMM_STATS_H_
#define ZEROSHARD_COMM_COMM_STATS_H_

#include <array>
#include <cstdint>

namespace zeroshard {

enum class CommOp : uint8_t {
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
  kSplit,
  // Appended: the numbering is part of the debug-checks fingerprint.
  kAllToAll,
};
inline constexpr int kNumCommOps = 9;

// "AllGather", "ReduceScatter", ... (the names error messages use).
const char* CommOpName(CommOp op);

struct OpCounters {
  int64_t calls = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
};

struct CommStats {
  std::array<OpCounters, kNumCommOps> per_op;

  const OpCounters& operator[](CommOp op) const { return per_op[static_cast<int>(op)]; }
  OpCounters& operator[](CommOp op) { return per_op[static_cast<int>(op)]; }
  // Sum over every op.
  OpCounters Total() const;
  void Reset() { per_op = {}; }

  // Counts one call of `op` by `rank` in a group of `group_size`.
  // `bytes_per_rank` is the per-rank element count times the element size:
  // AllGather's input, ReduceScatter's output, one AllToAll block (count
  // elements), the AllReduce/Broadcast/Send/Recv buffer. `is_root` matters
  // for Broadcast only.
  void Record(CommOp op, int group_size, int64_t bytes_per_rank, bool is_root);
};

// Counters accumulated between two snapshots (after - before), per op.
CommStats operator-(const CommStats& after, const CommStats& before);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_COMM_STATS_H_

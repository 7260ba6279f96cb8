#include "comm/comm_stats.h"

namespace zeroshard {

const char* CommOpName(CommOp op) {
  switch (op) {
    case CommOp::kAllGather:
      return "AllGather";
    case CommOp::kReduceScatter:
      return "ReduceScatter";
    case CommOp::kAllReduce:
      return "AllReduce";
    case CommOp::kBroadcast:
      return "Broadcast";
    case CommOp::kSend:
      return "Send";
    case CommOp::kRecv:
      return "Recv";
    case CommOp::kBarrier:
      return "Barrier";
    case CommOp::kSplit:
      return "Split";
    case CommOp::kAllToAll:
      return "AllToAll";
  }
  return "UnknownOp";
}

OpCounters CommStats::Total() const {
  OpCounters total;
  for (const OpCounters& c : per_op) {
    total.calls += c.calls;
    total.bytes_sent += c.bytes_sent;
    total.bytes_received += c.bytes_received;
  }
  return total;
}

void CommStats::Record(CommOp op, int group_size, int64_t bytes_per_rank, bool is_root) {
  OpCounters& c = (*this)[op];
  ++c.calls;
  const int64_t n = group_size;
  int64_t sent = 0;
  int64_t received = 0;
  switch (op) {
    case CommOp::kAllGather:
    case CommOp::kReduceScatter:
    case CommOp::kAllToAll:  // n-1 blocks out, n-1 blocks in
      sent = received = (n - 1) * bytes_per_rank;
      break;
    case CommOp::kAllReduce:
      // 2(n-1)/n · B, exact in integers when B is a multiple of n; otherwise
      // rounded down (the ring's chunks are then uneven).
      sent = received = 2 * (n - 1) * bytes_per_rank / n;
      break;
    case CommOp::kBroadcast:
      if (n > 1) (is_root ? sent : received) = bytes_per_rank;
      break;
    case CommOp::kSend:
      sent = bytes_per_rank;
      break;
    case CommOp::kRecv:
      received = bytes_per_rank;
      break;
    case CommOp::kBarrier:
    case CommOp::kSplit:
      break;
  }
  c.bytes_sent += sent;
  c.bytes_received += received;
}

CommStats operator-(const CommStats& after, const CommStats& before) {
  CommStats d;
  for (int i = 0; i < kNumCommOps; ++i) {
    d.per_op[i].calls = after.per_op[i].calls - before.per_op[i].calls;
    d.per_op[i].bytes_sent = after.per_op[i].bytes_sent - before.per_op[i].bytes_sent;
    d.per_op[i].bytes_received = after.per_op[i].bytes_received - before.per_op[i].bytes_received;
  }
  return d;
}

}  // namespace zeroshard

// One Chrome-trace JSON file from every rank's Timeline (engine.logging.
// trace_path). It opens in Perfetto (ui.perfetto.dev) and chrome://tracing:
// one process per rank ("rank r", pid r), threads "compute" (tid 0) and
// "comm" (tid 1), "X" complete events, a "memory" counter per rank.
//
// Clocks: ranks may sit on different hosts, so each rank's steady clock is
// mapped onto rank 0's by a ping-pong with rank 0 (kClockSyncRounds round
// trips; the one with the shortest round trip gives the offset, accurate to
// half of it). Timestamps are microseconds since rank 0's timeline origin.
// The offsets and round trips are written under "otherData".
//
// Durability: rank 0 writes <path>.tmp, fsyncs it and renames it over
// <path>, so a reader never sees half a trace.
#ifndef ZEROSHARD_ENGINE_TRACE_WRITER_H_
#define ZEROSHARD_ENGINE_TRACE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/timeline.h"

namespace zeroshard {

inline constexpr int kClockSyncRounds = 8;

struct TraceFileInfo {
  int64_t events = 0;  // every rank's events, metadata excluded (rank 0; others: their own)
  int64_t bytes = 0;   // file size (rank 0; others: 0)
};

// The JSON objects of one rank's events, comma-separated, with pid `rank`,
// metadata first, then by start time (longer first among equal starts):
// timestamps are (t - clock_offset - origin) in microseconds, with
// `origin` and `clock_offset` (this rank's clock minus rank 0's) in
// nanoseconds of the steady clock. Exposed for tests.
std::string RankEventsJson(const Timeline& timeline, int rank, int64_t origin_ns, int64_t clock_offset_ns);

// Collective over `comm`. `other_data` entries (key, JSON value text) go
// under "otherData" next to the clock offsets. The same status code on every
// rank: rank 0's error names the path and the reason; the other ranks get
// "rank 0 failed to write the trace <path> (see its error)" with that code.
// A rank whose events exceed one message (8 GiB) makes it kResourceExhausted.
// Rank 0 holds every rank's events in memory while it writes.
absl::StatusOr<TraceFileInfo> WriteMergedTrace(Communicator& comm, const Timeline& timeline,
                                               const std::string& path,
                                               const std::vector<std::pair<std::string, std::string>>& other_data);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TRACE_WRITER_H_

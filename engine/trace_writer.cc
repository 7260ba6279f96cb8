#include "engine/trace_writer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/file_io.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagPing = 1, kTagPong = 2, kTagOffset = 3, kTagLength = 4, kTagEvents = 5;

int64_t Ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Microseconds with nanosecond digits, from integer nanoseconds (no float rounding).
std::string Micros(int64_t ns) {
  if (ns < 0) ns = 0;  // only clock-sync error can put an event before the origin
  return absl::StrFormat("%d.%03d", ns / 1000, ns % 1000);
}

std::string SignedMicros(int64_t ns) { return ns < 0 ? absl::StrCat("-", Micros(-ns)) : Micros(ns); }

// Invalid UTF-8 in a user's unit name becomes U+FFFD instead of throwing.
std::string Quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ArgsJson(const std::vector<TraceArg>& args) {
  std::string out = "{";
  for (size_t i = 0; i < args.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",", Quoted(args[i].key), ":", args[i].value);
  }
  return absl::StrCat(out, "}");
}

// int64 as two i32 words (the communicator has no 64-bit integer type).
std::vector<int32_t> Words(int64_t v) {
  std::vector<int32_t> w(2);
  std::memcpy(w.data(), &v, sizeof(v));
  return w;
}
int64_t FromWords(const std::vector<int32_t>& w) {
  int64_t v;
  std::memcpy(&v, w.data(), sizeof(v));
  return v;
}

absl::Status SendI64(Communicator& comm, int64_t v, int peer, int tag) {
  std::vector<int32_t> w = Words(v);
  return comm.Send(w.data(), 2, DType::kI32, peer, tag)->Wait();
}
absl::StatusOr<int64_t> RecvI64(Communicator& comm, int peer, int tag) {
  std::vector<int32_t> w(2);
  RETURN_IF_ERROR(comm.Recv(w.data(), 2, DType::kI32, peer, tag)->Wait());
  return FromWords(w);
}

struct ClockSync {
  std::vector<int64_t> offset_ns;  // rank 0 only: per rank, its clock minus rank 0's
  std::vector<int64_t> rtt_ns;     // rank 0 only: the round trip the offset came from
  int64_t my_offset_ns = 0;        // every rank: its own offset
};

// Rank 0 ping-pongs each other rank in turn; the shortest round trip wins.
absl::StatusOr<ClockSync> SyncClocks(Communicator& comm) {
  ClockSync sync;
  const int n = comm.size();
  if (comm.rank() == 0) {
    sync.offset_ns.assign(n, 0);
    sync.rtt_ns.assign(n, 0);
    for (int r = 1; r < n; ++r) {
      int64_t best_rtt = std::numeric_limits<int64_t>::max();
      for (int k = 0; k < kClockSyncRounds; ++k) {
        const int64_t t1 = Ns(Clock::now());
        RETURN_IF_ERROR(SendI64(comm, k, r, kTagPing));
        ASSIGN_OR_RETURN(int64_t t2, RecvI64(comm, r, kTagPong));
        const int64_t t3 = Ns(Clock::now());
        if (t3 - t1 < best_rtt) {
          best_rtt = t3 - t1;
          sync.offset_ns[r] = t2 - (t1 + (t3 - t1) / 2);
        }
      }
      sync.rtt_ns[r] = best_rtt;
      RETURN_IF_ERROR(SendI64(comm, sync.offset_ns[r], r, kTagOffset));
    }
  } else {
    for (int k = 0; k < kClockSyncRounds; ++k) {
      RETURN_IF_ERROR(RecvI64(comm, 0, kTagPing).status());
      RETURN_IF_ERROR(SendI64(comm, Ns(Clock::now()), 0, kTagPong));
    }
    ASSIGN_OR_RETURN(sync.my_offset_ns, RecvI64(comm, 0, kTagOffset));
  }
  return sync;
}

std::string MetadataJson(int rank) {
  std::string out = absl::StrFormat(
      R"({"ph":"M","name":"process_name","pid":%d,"args":{"name":"rank %d"}},)"
      R"({"ph":"M","name":"process_sort_index","pid":%d,"args":{"sort_index":%d}})",
      rank, rank, rank, rank);
  for (TraceTrack t : {TraceTrack::kCompute, TraceTrack::kComm}) {
    absl::StrAppendFormat(&out,
                          R"(,{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"%s"}})"
                          R"(,{"ph":"M","name":"thread_sort_index","pid":%d,"tid":%d,"args":{"sort_index":%d}})",
                          rank, static_cast<int>(t), TraceTrackName(t), rank, static_cast<int>(t),
                          static_cast<int>(t));
  }
  return out;
}

// <path>.tmp, fsync, rename; a failed attempt leaves no .tmp behind.
absl::Status WriteFile(const std::string& path, const std::vector<std::string>& pieces) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  std::vector<absl::string_view> views(pieces.begin(), pieces.end());
  absl::Status s = WriteFileDurably(tmp, views);
  if (s.ok()) s = RenamePath(tmp, path);
  if (!s.ok()) {
    std::remove(tmp.c_str());
    return s;
  }
  return SyncDirectory(DirName(path));
}

}  // namespace

std::string RankEventsJson(const Timeline& timeline, int rank, int64_t origin_ns, int64_t clock_offset_ns) {
  std::string out = MetadataJson(rank);
  // Scopes record a span when it closes (inner before outer); the file lists
  // events by start, a parent before a child that starts with it.
  std::vector<const TraceEvent*> order;
  for (const TraceEvent& e : timeline.events()) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const TraceEvent* a, const TraceEvent* b) {
    if (a->begin != b->begin) return a->begin < b->begin;
    return a->end > b->end;
  });
  for (const TraceEvent* event : order) {
    const TraceEvent& e = *event;
    // Clamped at the origin as a whole span, so a clamped span still nests.
    const int64_t begin = std::max<int64_t>(0, Ns(e.begin) - clock_offset_ns - origin_ns);
    const int64_t end = std::max<int64_t>(begin, Ns(e.end) - clock_offset_ns - origin_ns);
    if (e.kind == TraceEvent::Kind::kCounter) {
      absl::StrAppend(&out, ",\n", R"({"ph":"C","name":)", Quoted(e.name), R"(,"pid":)", rank, R"(,"ts":)",
                      Micros(begin), R"(,"args":)", ArgsJson(e.args), "}");
      continue;
    }
    absl::StrAppend(&out, ",\n", R"({"ph":"X","cat":)", Quoted(e.category), R"(,"name":)", Quoted(e.name),
                    R"(,"pid":)", rank, R"(,"tid":)", static_cast<int>(e.track), R"(,"ts":)", Micros(begin),
                    R"(,"dur":)", Micros(end - begin), R"(,"args":)", ArgsJson(e.args), "}");
  }
  return out;
}

absl::StatusOr<TraceFileInfo> WriteMergedTrace(Communicator& comm, const Timeline& timeline,
                                               const std::string& path,
                                               const std::vector<std::pair<std::string, std::string>>& other_data) {
  const int n = comm.size();
  const int rank = comm.rank();
  ASSIGN_OR_RETURN(ClockSync sync, SyncClocks(comm));
  // Rank 0's origin, in rank 0's clock, for everyone.
  std::vector<int32_t> origin_words = Words(Ns(timeline.origin()));
  RETURN_IF_ERROR(comm.Broadcast(origin_words.data(), 2, DType::kI32, 0)->Wait());
  const int64_t origin_ns = FromWords(origin_words);
  const std::string mine = RankEventsJson(timeline, rank, origin_ns, sync.my_offset_ns);

  TraceFileInfo info;
  info.events = static_cast<int64_t>(timeline.events().size());
  absl::Status written;
  if (rank != 0) {
    // Padded to whole i32 words; the length says how many bytes count, and
    // -1 that the events do not fit one message (rank 0 then fails the write).
    const int64_t words_needed = static_cast<int64_t>(mine.size()) / 4 + 1;
    const bool fits = words_needed <= std::numeric_limits<int32_t>::max();
    RETURN_IF_ERROR(SendI64(comm, fits ? static_cast<int64_t>(mine.size()) : -1, 0, kTagLength));
    RETURN_IF_ERROR(SendI64(comm, info.events, 0, kTagLength));
    if (fits) {
      std::vector<int32_t> words(words_needed, 0);
      std::memcpy(words.data(), mine.data(), mine.size());
      RETURN_IF_ERROR(comm.Send(words.data(), words_needed, DType::kI32, 0, kTagEvents)->Wait());
    }
  } else {
    std::vector<std::string> pieces;
    pieces.push_back("{\"traceEvents\":[\n");
    pieces.push_back(mine);
    for (int r = 1; r < n; ++r) {
      ASSIGN_OR_RETURN(int64_t length, RecvI64(comm, r, kTagLength));
      ASSIGN_OR_RETURN(int64_t events, RecvI64(comm, r, kTagLength));
      if (length < 0) {
        written = absl::ResourceExhaustedError(absl::StrCat(
            "rank ", r, "'s ", events, " trace events exceed one message (8 GiB); lower engine.logging.trace_steps"));
        continue;
      }
      std::vector<int32_t> words(length / 4 + 1, 0);
      RETURN_IF_ERROR(
          comm.Recv(words.data(), static_cast<int64_t>(words.size()), DType::kI32, r, kTagEvents)->Wait());
      pieces.push_back(",\n");
      pieces.emplace_back(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(length));
      info.events += events;
    }
    std::vector<std::string> offsets, rtts;
    for (int r = 0; r < n; ++r) {
      offsets.push_back(SignedMicros(sync.offset_ns[r]));
      rtts.push_back(Micros(sync.rtt_ns[r]));
    }
    std::string footer = absl::StrCat("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"ranks\":", n,
                                      ",\"clock_offset_us\":[", absl::StrJoin(offsets, ","),
                                      "],\"clock_sync_rtt_us\":[", absl::StrJoin(rtts, ","), "]");
    for (const auto& [key, value] : other_data) absl::StrAppend(&footer, ",", Quoted(key), ":", value);
    absl::StrAppend(&footer, "}}\n");
    pieces.push_back(footer);
    if (written.ok()) written = WriteFile(path, pieces);
    for (const std::string& p : pieces) info.bytes += static_cast<int64_t>(p.size());
  }
  // Every rank returns rank 0's outcome, with its code.
  int32_t code = static_cast<int32_t>(written.code());
  RETURN_IF_ERROR(comm.Broadcast(&code, 1, DType::kI32, 0)->Wait());
  if (!written.ok()) return written;
  if (code != 0) {
    return absl::Status(static_cast<absl::StatusCode>(code),
                        absl::StrCat("rank 0 failed to write the trace ", path, " (see its error)"));
  }
  return info;
}

}  // namespace zeroshard

// Timeline: one rank's trace events, for the merged Chrome/Perfetto trace of
// engine.logging.trace_path (engine/trace_writer.h writes it).
//
// Two tracks per rank: kCompute is the engine's own thread (steps, passes,
// each unit's forward/backward/recompute, the optimizer, and the time it is
// blocked waiting for a collective); kComm is when collectives actually ran
// (comm/communicator.h WorkSpan), so a gather drawn under a unit's forward
// ran while that unit computed. Counters sample memory per category.
//
// Spans on one track nest or follow each other (they are recorded by scopes
// on one thread, or are one communicator's collectives, which run in issue
// order). A backend that does not report when an operation ran (NCCL) is
// drawn from issue to the end of the wait, and such comm spans may overlap.
// Times are the host's steady clock; the writer aligns ranks.
//
// Recording is on only while the window is open (set_recording); a Timeline
// that is not recording, or a null Timeline*, costs a branch per event (and
// a clock read where a collective is issued); no string or vector is built.
// Thread-compatible: one thread records.
#ifndef ZEROSHARD_CORE_TIMELINE_H_
#define ZEROSHARD_CORE_TIMELINE_H_

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace zeroshard {

enum class TraceTrack : uint8_t { kCompute = 0, kComm = 1 };
// "compute", "comm" (the trace's thread names).
const char* TraceTrackName(TraceTrack track);

// An integer argument shown with the event (keys are string literals).
struct TraceArg {
  const char* key;
  int64_t value;
};

struct TraceEvent {
  enum class Kind : uint8_t { kSpan, kCounter };
  using TimePoint = std::chrono::steady_clock::time_point;
  Kind kind = Kind::kSpan;
  TraceTrack track = TraceTrack::kCompute;
  const char* category = "";  // a literal: "step", "forward", "gather", ...
  std::string name;
  TimePoint begin;
  TimePoint end;  // == begin for counters
  std::vector<TraceArg> args;
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // The origin is the moment of construction: the trace's time zero (rank 0's).
  Timeline() : origin_(Clock::now()) {}
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  Clock::time_point origin() const { return origin_; }
  bool recording() const { return recording_; }
  void set_recording(bool on) { recording_ = on; }

  // Both ignored while not recording.
  void AddSpan(TraceTrack track, const char* category, std::string name, Clock::time_point begin,
               Clock::time_point end, std::vector<TraceArg> args = {});
  void AddCounter(const char* name, Clock::time_point at, std::vector<TraceArg> values);

  const std::vector<TraceEvent>& events() const { return events_; }
  void Clear() { events_.clear(); }

 private:
  Clock::time_point origin_;
  bool recording_ = true;
  std::vector<TraceEvent> events_;
};

// Records [construction, destruction) as a kCompute span named
// prefix + " " + suffix (or just prefix) when `timeline` is recording.
// Builds no string otherwise.
class TraceScope {
 public:
  TraceScope(Timeline* timeline, const char* category, absl::string_view prefix, absl::string_view suffix = {},
             std::initializer_list<TraceArg> args = {});
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Timeline* timeline_;  // null when not recording at construction
  const char* category_ = "";
  std::string name_;
  std::vector<TraceArg> args_;
  Timeline::Clock::time_point begin_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_TIMELINE_H_

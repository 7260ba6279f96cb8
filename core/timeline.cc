#include "core/timeline.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

const char* TraceTrackName(TraceTrack track) { return track == TraceTrack::kCompute ? "compute" : "comm"; }

void Timeline::AddSpan(TraceTrack track, const char* category, std::string name, Clock::time_point begin,
                       Clock::time_point end, std::vector<TraceArg> args) {
  if (!recording_) return;
  TraceEvent e;
  e.kind = TraceEvent::Kind::kSpan;
  e.track = track;
  e.category = category;
  e.name = std::move(name);
  e.begin = begin;
  e.end = end < begin ? begin : end;
  e.args = std::move(args);
  events_.push_back(std::move(e));
}

void Timeline::AddCounter(const char* name, Clock::time_point at, std::vector<TraceArg> values) {
  if (!recording_) return;
  TraceEvent e;
  e.kind = TraceEvent::Kind::kCounter;
  e.category = "memory";
  e.name = name;
  e.begin = e.end = at;
  e.args = std::move(values);
  events_.push_back(std::move(e));
}

TraceScope::TraceScope(Timeline* timeline, const char* category, absl::string_view prefix, absl::string_view suffix,
                       std::initializer_list<TraceArg> args)
    : timeline_(timeline != nullptr && timeline->recording() ? timeline : nullptr) {
  if (timeline_ == nullptr) return;
  category_ = category;
  name_ = suffix.empty() ? std::string(prefix) : absl::StrCat(prefix, " ", suffix);
  args_.assign(args.begin(), args.end());
  begin_ = Timeline::Clock::now();
}

TraceScope::~TraceScope() {
  if (timeline_ == nullptr) return;
  timeline_->AddSpan(TraceTrack::kCompute, category_, std::move(name_), begin_, Timeline::Clock::now(),
                     std::move(args_));
}

}  // namespace zeroshard

#include "comm/traced_wait.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace zeroshard {

namespace {

template <typename WaitFn>
absl::Status WaitTracedWith(Work& work, const WaitFn& wait, Timeline* timeline, const char* category,
                            absl::string_view what, absl::string_view detail,
                            std::chrono::steady_clock::time_point issued, int64_t bytes) {
  if (timeline == nullptr || !timeline->recording()) return wait();
  const bool was_done = work.IsCompleted();
  const auto blocked_from = Timeline::Clock::now();
  absl::Status s = wait();
  const auto blocked_to = Timeline::Clock::now();
  std::string name = detail.empty() ? std::string(what) : absl::StrCat(what, " ", detail);
  if (!was_done) timeline->AddSpan(TraceTrack::kCompute, "wait", absl::StrCat("wait ", name), blocked_from, blocked_to);
  const std::optional<WorkSpan> ran = work.ExecutedSpan();
  const auto start = ran.has_value() ? ran->start : issued;
  const auto end = ran.has_value() ? ran->end : blocked_to;
  const int64_t queued_us = std::chrono::duration_cast<std::chrono::microseconds>(start - issued).count();
  timeline->AddSpan(TraceTrack::kComm, category, std::move(name), start, end,
                    {{"bytes", bytes}, {"queued_us", queued_us}});
  return s;
}

}  // namespace

absl::Status WaitTraced(Work& work, Timeline* timeline, const char* category, absl::string_view what,
                        absl::string_view detail, std::chrono::steady_clock::time_point issued, int64_t bytes) {
  return WaitTracedWith(work, [&] { return work.Wait(); }, timeline, category, what, detail, issued, bytes);
}

absl::Status WaitTracedOn(Work& work, void* cuda_stream, Timeline* timeline, const char* category,
                          absl::string_view what, absl::string_view detail,
                          std::chrono::steady_clock::time_point issued, int64_t bytes) {
  return WaitTracedWith(work, [&] { return work.WaitOn(cuda_stream); }, timeline, category, what, detail, issued,
                        bytes);
}

}  // namespace zeroshard

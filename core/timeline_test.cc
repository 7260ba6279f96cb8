#include "core/timeline.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(TimelineTest, ScopesNestAndCarryNamesAndArgs) {
  Timeline tl;
  {
    TraceScope outer(&tl, "step", "step", "3", {{"step", 3}});
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    { TraceScope inner(&tl, "forward", "forward", "h.0"); }
  }
  ASSERT_EQ(tl.events().size(), 2u);
  const TraceEvent& inner = tl.events()[0];  // recorded when it closes, first
  const TraceEvent& outer = tl.events()[1];
  EXPECT_EQ(inner.name, "forward h.0");
  EXPECT_STREQ(inner.category, "forward");
  EXPECT_EQ(outer.name, "step 3");
  EXPECT_EQ(outer.track, TraceTrack::kCompute);
  ASSERT_EQ(outer.args.size(), 1u);
  EXPECT_STREQ(outer.args[0].key, "step");
  EXPECT_EQ(outer.args[0].value, 3);
  EXPECT_LE(outer.begin, inner.begin);
  EXPECT_GE(outer.end, inner.end);
  EXPECT_GE(outer.end - outer.begin, std::chrono::milliseconds(1));
}

TEST(TimelineTest, NothingIsRecordedWhileStoppedOrWithoutATimeline) {
  Timeline tl;
  tl.set_recording(false);
  { TraceScope s(&tl, "step", "step"); }
  tl.AddCounter("memory", Timeline::Clock::now(), {{"params", 1}});
  tl.AddSpan(TraceTrack::kComm, "gather", "AllGather h.0", Timeline::Clock::now(), Timeline::Clock::now());
  EXPECT_TRUE(tl.events().empty());
  { TraceScope s(nullptr, "step", "step"); }  // a null timeline is allowed
  tl.set_recording(true);
  tl.AddCounter("memory", Timeline::Clock::now(), {{"params", 7}});
  ASSERT_EQ(tl.events().size(), 1u);
  EXPECT_EQ(tl.events()[0].kind, TraceEvent::Kind::kCounter);
  EXPECT_EQ(tl.events()[0].begin, tl.events()[0].end);
}

TEST(TimelineTest, AnEndBeforeTheBeginIsClampedToAnEmptySpan) {
  Timeline tl;
  const auto t = Timeline::Clock::now();
  tl.AddSpan(TraceTrack::kComm, "gather", "g", t, t - std::chrono::microseconds(5));
  ASSERT_EQ(tl.events().size(), 1u);
  EXPECT_EQ(tl.events()[0].end, t);
  EXPECT_STREQ(TraceTrackName(TraceTrack::kComm), "comm");
  EXPECT_STREQ(TraceTrackName(TraceTrack::kCompute), "compute");
}

}  // namespace
}  // namespace zeroshard

#include "engine/trace_writer.h"

#include <chrono>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

int64_t Ns(Timeline::Clock::time_point t) {
  return std::chrono::duration_cast<nanoseconds>(t.time_since_epoch()).count();
}

TEST(RankEventsJsonTest, SpansAndCountersInMicrosecondsSinceTheOriginWithThisRanksOffset) {
  Timeline tl;
  const auto origin = tl.origin();
  tl.AddSpan(TraceTrack::kCompute, "forward", "forward h.0", origin + nanoseconds(2'001'500),
             origin + nanoseconds(2'501'750), {{"unit", 1}});
  tl.AddSpan(TraceTrack::kComm, "gather", "AllGather \"odd\" name", origin + microseconds(3), origin + microseconds(9),
             {{"bytes", 4096}, {"queued_us", 2}});
  tl.AddCounter("memory", origin + microseconds(10), {{"params", 128}, {"grads", 0}});
  // This rank's clock runs 1 µs ahead of rank 0's.
  const std::string text = RankEventsJson(tl, 2, Ns(origin), /*clock_offset_ns=*/1000);
  nlohmann::json events = nlohmann::json::parse("[" + text + "]");
  ASSERT_EQ(events.size(), 6u + 3u);  // process name and order, two thread names and orders; 3 events
  EXPECT_EQ(events[0], nlohmann::json::parse(R"({"ph":"M","name":"process_name","pid":2,"args":{"name":"rank 2"}})"));
  EXPECT_EQ(events[1],
            nlohmann::json::parse(R"({"ph":"M","name":"process_sort_index","pid":2,"args":{"sort_index":2}})"));
  EXPECT_EQ(events[2],
            nlohmann::json::parse(R"({"ph":"M","name":"thread_name","pid":2,"tid":0,"args":{"name":"compute"}})"));
  EXPECT_EQ(events[4],
            nlohmann::json::parse(R"({"ph":"M","name":"thread_name","pid":2,"tid":1,"args":{"name":"comm"}})"));
  // Integer nanoseconds printed as microseconds with three decimals, exactly.
  EXPECT_NE(text.find(R"({"ph":"X","cat":"forward","name":"forward h.0","pid":2,"tid":0,"ts":2000.500,)"
                      R"("dur":500.250,"args":{"unit":1}})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"({"ph":"X","cat":"gather","name":"AllGather \"odd\" name","pid":2,"tid":1,"ts":2.000,)"
                      R"("dur":6.000,"args":{"bytes":4096,"queued_us":2}})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"({"ph":"C","name":"memory","pid":2,"ts":9.000,"args":{"params":128,"grads":0}})"),
            std::string::npos)
      << text;
  // Listed by start: the gather (3 µs), the counter (10 µs), the forward.
  EXPECT_EQ(events[6]["name"], "AllGather \"odd\" name");  // escaped, and parses back
  EXPECT_EQ(events[7]["ph"], "C");
  EXPECT_EQ(events[8]["name"], "forward h.0");
}

TEST(RankEventsJsonTest, EventsAreListedByStartWithAParentBeforeItsChild) {
  Timeline tl;
  const auto t = tl.origin() + microseconds(5);
  // Recorded as scopes close: the child first, then its parent with the same start.
  tl.AddSpan(TraceTrack::kCompute, "forward", "child", t, t + microseconds(2));
  tl.AddSpan(TraceTrack::kCompute, "pass", "parent", t, t + microseconds(8));
  tl.AddSpan(TraceTrack::kCompute, "step", "earlier", t - microseconds(1), t);
  nlohmann::json events = nlohmann::json::parse("[" + RankEventsJson(tl, 0, Ns(tl.origin()), 0) + "]");
  ASSERT_EQ(events.size(), 6u + 3u);
  EXPECT_EQ(events[6]["name"], "earlier");
  EXPECT_EQ(events[7]["name"], "parent");
  EXPECT_EQ(events[8]["name"], "child");
}

TEST(RankEventsJsonTest, ThePartOfASpanBeforeTheOriginIsCutSoItStillNests) {
  Timeline tl;
  tl.AddSpan(TraceTrack::kComm, "gather", "g", tl.origin(), tl.origin() + microseconds(4));
  tl.AddSpan(TraceTrack::kComm, "gather", "h", tl.origin(), tl.origin() + microseconds(2));
  // Rank 0's origin is 3 µs after this rank's first events once aligned:
  // [-3, 1) becomes [0, 1); [-3, -1) becomes empty at 0.
  const std::string text = RankEventsJson(tl, 1, Ns(tl.origin()) + 3000, 0);
  EXPECT_NE(text.find(R"("name":"g","pid":1,"tid":1,"ts":0.000,"dur":1.000)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("name":"h","pid":1,"tid":1,"ts":0.000,"dur":0.000)"), std::string::npos) << text;
}

TEST(RankEventsJsonTest, AnEmptyTimelineGivesOnlyTheRanksNames) {
  Timeline tl;
  nlohmann::json events = nlohmann::json::parse("[" + RankEventsJson(tl, 0, Ns(tl.origin()), 0) + "]");
  EXPECT_EQ(events.size(), 6u);
  for (const auto& e : events) EXPECT_EQ(e["ph"], "M");
}

}  // namespace
}  // namespace zeroshard

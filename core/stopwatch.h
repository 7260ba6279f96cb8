// Wall-clock intervals on the monotonic clock, for step timings.
#ifndef ZEROSHARD_CORE_STOPWATCH_H_
#define ZEROSHARD_CORE_STOPWATCH_H_

#include <chrono>

namespace zeroshard {

using SteadyClock = std::chrono::steady_clock;

inline double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_STOPWATCH_H_

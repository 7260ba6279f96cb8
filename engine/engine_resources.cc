#include "engine/engine_resources.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace zeroshard {

std::string EngineResources::ControlGroup() const {
  return comms.control->name().substr(0, comms.control->name().find('.'));
}

absl::Status EngineResources::CheckUsable() const {
  if (broken.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the engine is unusable after a failure in the middle of a collective sequence: ", broken.message()));
}

void EngineResources::TraceMemory() {
  if (timeline == nullptr || !timeline->recording()) return;
  std::vector<TraceArg> bytes;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const MemoryCategory category = static_cast<MemoryCategory>(c);
    bytes.push_back({MemoryCategoryName(category), tracker.Usage(category).current});
  }
  timeline->AddCounter("memory", Timeline::Clock::now(), std::move(bytes));
}

}  // namespace zeroshard

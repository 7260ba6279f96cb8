// Checking that an engine communicates exactly what its step program says:
// the train program's collectives on the data-parallel groups ("dp", the
// group ZeRO shards over, and "dp_replica" under hybrid sharding), counted
// as CommStats counts them, against the engine's communicators over one
// training step.
#ifndef ZEROSHARD_ENGINE_TESTING_PROGRAM_CHECK_H_
#define ZEROSHARD_ENGINE_TESTING_PROGRAM_CHECK_H_

#include <functional>
#include <string>

#include "engine/engine.h"

namespace zeroshard {

struct ProgramCheck {
  std::string predicted;  // "dp AllGather: 3 calls, 1234 bytes; ..."
  std::string measured;
};

// Runs `step` (one TrainStep of `engine`) and describes both sides, per
// group and op, in the same form: equal strings mean the same calls and
// bytes sent.
ProgramCheck CheckStepAgainstProgram(Engine& engine, const std::function<void()>& step);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_PROGRAM_CHECK_H_

// The two ends of a pipeline's tied weight, checked in multi-rank tests.
#ifndef ZEROSHARD_ENGINE_TESTING_TIED_COPIES_H_
#define ZEROSHARD_ENGINE_TESTING_TIED_COPIES_H_

#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/state_view.h"

namespace zeroshard {

// Collective over the embedding group of the first and the last stage
// (true at once elsewhere and without a pipeline): whether unit 0 (the
// embedding) has bitwise the same compute parameters on both ends — the
// same tp slice and dp shard (stage 0: the whole buffer) — and only the
// first stage, which owns it, keeps its master (the mirror has none).
bool TiedCopiesEqual(Engine& engine, ProcessGrid& grid);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_TIED_COPIES_H_

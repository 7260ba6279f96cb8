// EngineStateView: this rank's training state, unit by unit and kind by
// kind, for code that saves, loads, checks or edits it (checkpoints,
// tests) without the engine's internals (docs/architecture.md, "The engine
// API"). Reached from Engine::state().
//
// Kinds, in this order (their indices are stable for one engine):
//   0 "params"  the compute parameters as the engine keeps them at rest, in
//               the compute dtype: the whole padded buffer [0, P) under
//               stages 0-2, the rank's shard under stage 3
//   1 "master"  the f32 master weights: [0, P) under stage 0, the rank's
//               shard [ShardBegin(rank), +S) otherwise
//   2 "grad"    the f32 reduced gradient shard [ShardBegin(rank), +S):
//               stages 2-3 always (trainable units); stages 0-1 only
//               during a step, so absent between steps
//   3...        the optimizer's state kinds (ShardedOptimizer::state_kinds:
//               AdamW's exp_avg and exp_avg_sq, SGD's momentum; plain SGD
//               none), each over the master's region of a trainable unit
// S, P and ShardBegin are those of the unit's layout (Engine::layout), laid
// out over the group ZeRO shards over. A region's bytes are what the
// engine's memory categories hold for it (docs/sharding.md): summed over
// units, "params" is kParams, "master" kMasterParams, the optimizer's kinds
// kOptimizerState, and under stages 2-3 "grad" kGrads, at rest.
//
// A kind a unit does not hold (a frozen unit's gradient and optimizer
// state, a unit of another pipeline stage, a gradient shard between steps
// under stages 0-1) is `present` false with length 0.
//
// Writes take effect as they are made: the next step trains on what was
// written (to the master and the optimizer state; the compute parameters
// are rounded from the master at each step's end, and by Commit). Thread-
// compatible with the engine: only between calls into it.
#ifndef ZEROSHARD_ENGINE_STATE_VIEW_H_
#define ZEROSHARD_ENGINE_STATE_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/device.h"
#include "core/dtype.h"

namespace zeroshard {

struct StateKindInfo {
  std::string name;             // "params", "master", "grad", then the optimizer's names
  DType dtype = DType::kF32;
  int64_t bytes_per_element = 4;
  // The name shard files and manifests use ("master" and the optimizer's
  // kinds); empty for kinds checkpoints do not hold (params, grad).
  std::string checkpoint_name;
};

// One kind of one unit on this rank: elements [begin, begin + length) of
// the unit's flat buffer.
struct StateRegion {
  bool present = false;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // {length}: flat
  int64_t begin = 0;
  int64_t length = 0;
  int64_t bytes = 0;           // length · bytes_per_element
  Device device = Device::kCpu;
};

class EngineStateView {
 public:
  static constexpr int kParams = 0;
  static constexpr int kMaster = 1;
  static constexpr int kGrad = 2;
  static constexpr int kFirstOptimizerKind = 3;

  virtual ~EngineStateView() = default;

  virtual int num_units() const = 0;
  virtual const std::vector<StateKindInfo>& kinds() const = 0;
  int num_kinds() const { return static_cast<int>(kinds().size()); }
  // The index of the kind with this name or checkpoint name; -1 if none.
  int FindKind(absl::string_view name) const {
    for (int k = 0; k < num_kinds(); ++k) {
      if (kinds()[k].name == name || (!kinds()[k].checkpoint_name.empty() && kinds()[k].checkpoint_name == name)) {
        return k;
      }
    }
    return -1;
  }

  // Unit `unit`'s region of kind `kind` (both in range, or a region that is
  // not present).
  virtual StateRegion region(int unit, int kind) const = 0;
  // Its first element on the region's device; null when not present, and
  // for a kind on the NVMe tier (engine.offload: NVME, which keeps no
  // resident copy: use Read and Write).
  virtual void* data(int unit, int kind) = 0;
  virtual const void* data(int unit, int kind) const = 0;

  // Elements [offset, offset + count) of the region to or from host memory
  // (copied across when the engine runs on a GPU). kOutOfRange naming the
  // unit, the kind and the region's length for a range outside it (a
  // region that is not present has length 0); kInvalidArgument for an
  // unknown unit or kind. A kind on the NVMe tier is read and written in
  // its file, one chunk of memory at a time, after every I/O in flight
  // (docs/offload_streaming.md); an I/O error is returned.
  virtual absl::Status Read(int unit, int kind, int64_t offset, int64_t count, void* host_out) const = 0;
  virtual absl::Status Write(int unit, int kind, int64_t offset, int64_t count, const void* host_in) = 0;

  // Collective over the engine's shard group: rounds every unit's master
  // into its compute parameters, as a step's publication does (after
  // writing masters, e.g. a checkpoint load). The compute parameters then
  // are exactly what training from these masters would hold.
  virtual absl::Status Commit() = 0;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STATE_VIEW_H_

// EngineResources: what every part of the engine reads and none of them
// owns alone — the options and the step plan, the model, the communicators,
// the kernels' context on the engine's device, the memory tracker, the
// timeline and the observers — and the few services over them (device
// batches, host collectives, memory samples). The facade (EngineImpl) owns
// it; the sharded state, the executor, the pipeline transport, the optimizer
// phase and evaluation hold pointers to it. Private to //engine.
//
// Thread-compatible, like Engine.
#ifndef ZEROSHARD_ENGINE_ENGINE_RESOURCES_H_
#define ZEROSHARD_ENGINE_ENGINE_RESOURCES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "core/buffer.h"
#include "core/device.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "engine/engine_options.h"
#include "engine/observer.h"
#include "engine/step_plan.h"
#include "nn/batch.h"
#include "nn/model.h"
#include "nn/unit.h"

namespace zeroshard {

class ProcessGrid;

// The communicators an engine runs on. Data communicators carry tensors:
// `dp` the gathers and reductions, `world` (every rank of the job) the
// norm/loss/overflow all-reduce, `pp` the pipeline's activations and
// gradients, `embedding` the tied weight's gradient sum between the first
// and last stage. `control` (every rank of the job, host memory) carries the
// agreements: fingerprints, batch signatures, error codes, checkpoints,
// traces. Without pipeline parallelism world may be dp and control may be dp
// too (when dp works on host memory); pp and embedding may then be null.
struct EngineComms {
  // The group ZeRO shards over: all of dp, or under hybrid sharding the
  // rank's shard group, with `replica` (below) the ranks holding the same
  // shard.
  Communicator* dp = nullptr;
  Communicator* control = nullptr;
  Communicator* world = nullptr;
  Communicator* pp = nullptr;
  Communicator* embedding = nullptr;
  Communicator* tp = nullptr;       // the tensor-parallel group (null: tp 1)
  Communicator* replica = nullptr;  // hybrid sharding's replica group (null: none)
  const ProcessGrid* grid = nullptr;  // the grid they come from (null: one communicator)
};

struct EngineResources {
  int replicas() const { return comms.replica == nullptr ? 1 : comms.replica->size(); }
  // Ranks of the whole dp group (shard group size times replicas).
  int dp_size() const { return comms.dp->size() * replicas(); }
  // This rank's tensor-parallel coordinate (0 of 1 without a tp group).
  int tp_rank() const { return comms.tp == nullptr ? 0 : comms.tp->rank(); }
  int tp_size() const { return comms.tp == nullptr ? 1 : comms.tp->size(); }
  Device device() const { return options.device; }
  int num_units() const { return static_cast<int>(plan.layouts.size()); }
  // "dp" without pipeline stages (the job is the dp group), "world" with them.
  std::string ControlGroup() const;
  // kFailedPrecondition quoting `broken` once a failure left collectives or
  // buffers half done.
  absl::Status CheckUsable() const;

  // Calls `event` on every observer, in the order they were added.
  template <typename F>
  void Notify(const F& event) {
    for (EngineObserver* o : observers) event(*o);
  }
  // A memory counter sample on the timeline while it records.
  void TraceMemory();

  // engine_resources_device.cc: the kernels' context on options.device (on CUDA its
  // stream, cuBLAS handle and workspace, and the allocation stream), after
  // checking that the data communicators move that device's buffers.
  absl::Status InitDevice();
  // Points the NCCL communicators back at the legacy default stream: they
  // outlive the engine's compute stream (the grid owns them).
  void DetachDevice();
  // Every data communicator the engine was given (those it was not are null).
  std::vector<Communicator*> DataCommunicators() const {
    return {comms.dp, comms.replica, comms.world, comms.pp, comms.embedding, comms.tp};
  }
  // On a GPU, device copies of the host batches into *copies (the units
  // read those; the host ones still give the signature and the nominal
  // weight), their memory owned by *storage until the step ends. On the CPU
  // nothing: the batches are used as they are (BatchesToRun).
  absl::Status StageBatches(absl::Span<const Batch> batches, std::vector<Buffer>* storage, std::vector<Batch>* copies);
  static absl::Span<const Batch> BatchesToRun(absl::Span<const Batch> host, const std::vector<Batch>& copies) {
    return copies.empty() ? host : absl::MakeConstSpan(copies);
  }
  // A collective over host floats on a data communicator: directly when it
  // moves host buffers, through a device buffer when it moves device ones.
  // `issue` gets the input and output pointers (equal for in-place ops);
  // `wait` (default Work::Wait) waits for what it returned.
  absl::Status HostCollective(Communicator& comm, const float* in, int64_t in_count, float* out, int64_t out_count,
                              const std::function<std::unique_ptr<Work>(const void*, void*)>& issue,
                              const std::function<absl::Status(Work&)>& wait = nullptr);

  EngineOptions options;
  EngineComms comms;
  std::unique_ptr<Model> model;
  // CUDA stream, cuBLAS handle and workspace (type-erased: the header
  // compiles without CUDA); destroyed after every buffer below.
  std::shared_ptr<void> cuda_resources;
  // Pinned host staging for batch copies to the device (grown as needed;
  // reused once the step's read-back has passed the previous copies).
  PinnedHostBuffer batch_staging;
  MemoryTracker tracker;
  // Before the components, which point to it: destroyed after them.
  std::unique_ptr<Timeline> timeline;
  ComputeContext compute;
  // Layouts, unit roles, buckets and the programs (engine/step_plan.h).
  StepPlan plan;
  std::vector<EngineObserver*> observers;  // not owned
  // The failure that left collectives or buffers half done (OK: usable).
  absl::Status broken;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_ENGINE_RESOURCES_H_

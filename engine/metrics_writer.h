// JSON-lines metrics file (engine.logging.metrics_path), written by rank 0.
// The format is specified in docs/metrics.md: one header object, then one
// object per optimizer step. Each line is flushed when written, so a run that
// dies leaves every completed step readable.
#ifndef ZEROSHARD_ENGINE_METRICS_WRITER_H_
#define ZEROSHARD_ENGINE_METRICS_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/memory_tracker.h"
#include "kernels/context.h"

namespace zeroshard {

struct MetricsHeader {
  int64_t num_params = 0;
  int world_size = 1;
  // Hosts of the launch and ranks on each (0 when hosts run different
  // numbers of ranks; comm/host_topology.h).
  int hosts = 1;
  int ranks_per_host = 1;
  int dp = 1;
  int tp = 1;
  bool sequence_parallel = false;
  int pp = 1;
  int zero_stage = 0;
  std::string compute_dtype = "f32";
  int64_t tokens_per_step = 0;
  int gradient_accumulation_steps = 1;
  std::string config_path;
  // With pp > 1: the schedule and each stage's units, e.g.
  // "ONE_F_ONE_B; stage 0: embed..h.0; stage 1: h.1..head". Empty otherwise.
  std::string pipeline;
  // Hybrid sharding's shard group size (0: none) and the int8 quantizations
  // ("weights", "gradients"); recorded only when used.
  int shard_group_size = 0;
  std::vector<std::string> quantized;
  // What the CPU kernels ran on (kernels::DescribeCpuBlas()).
  kernels::CpuBlasInfo cpu_kernels;
  // The writing rank's memory plan (Engine::memory_plan()): its resident
  // peak per tier and in all, and the limit it was checked against.
  struct MemoryPlanSummary {
    int64_t device = 0;
    int64_t host = 0;
    int64_t nvme = 0;
    int64_t resident = 0;
    int64_t limit = 0;
  };
  std::optional<MemoryPlanSummary> memory_plan;
};

struct StepMetrics {
  // engine.checkpoint.async_save: the host snapshot's bytes now and at most
  // (written as mem's "checkpoint_snapshot"); unset without async saves.
  std::optional<MemoryUsage> checkpoint_snapshot;
  int64_t step = 0;
  float loss = 0;
  std::optional<float> val_loss;  // present on steps that evaluated
  float lr = 0;
  float grad_norm = 0;
  float loss_scale = 1;
  bool skipped = false;
  double tokens_per_s = 0;
  double step_ms = 0;
  int64_t comm_bytes = 0;  // bytes this rank sent in this step
  // comm_bytes by data group ("dp", "tp", "pp", "embed"; those the layout has).
  std::map<std::string, int64_t> comm_bytes_by_group;
  // The part of comm_bytes sent in collectives of groups that span hosts
  // (InterHostBytesSent, comm/host_topology.h); 0 on one host.
  int64_t inter_host_bytes = 0;
  // Logging steps: the slowest rank's compute over the interval
  // (engine/straggler.h).
  struct Straggler {
    int slowest_rank = 0;
    double slowest_ms = 0;
    double median_ms = 0;
  };
  std::optional<Straggler> straggler;
  // The NVMe tier's I/O during the step (StepResult::io; zeros without it).
  struct Io {
    int64_t read_bytes = 0;
    int64_t write_bytes = 0;
    double busy_ms = 0;
  };
  Io io;
  // The writing rank's planned resident peak and its measured peak RSS
  // (VmHWM) so far.
  struct MemoryPlanUse {
    int64_t planned_resident = 0;
    int64_t measured_peak_rss = 0;
  };
  std::optional<MemoryPlanUse> memory_plan;
};

class MetricsWriter {
 public:
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Creates (truncates) `path` and writes the header line. `append` keeps an
  // existing file (a resumed run) and writes no second header when the file
  // already has one. kInternal naming the path on I/O errors.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(const std::string& path, const MetricsHeader& header,
                                                             bool append);

  // One line for one step, with `memory`'s current and peak bytes per category.
  absl::Status Write(const StepMetrics& step, const MemoryTracker& memory);

 private:
  MetricsWriter(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  absl::Status WriteLine(const std::string& line);

  std::FILE* file_;
  std::string path_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_METRICS_WRITER_H_

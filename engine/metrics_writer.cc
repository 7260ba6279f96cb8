#include "engine/metrics_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace zeroshard {

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(const std::string& path,
                                                                   const MetricsHeader& header, bool append) {
  bool has_header = false;
  if (append) {
    std::ifstream existing(path);
    std::string first;
    has_header = std::getline(existing, first) && first.find("\"num_params\"") != std::string::npos;
  }
  std::FILE* f = std::fopen(path.c_str(), append ? "a" : "w");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat(path, ": cannot open metrics file: ", std::strerror(errno)));
  }
  std::unique_ptr<MetricsWriter> w(new MetricsWriter(f, path));
  if (!has_header) {
    nlohmann::json j = {
        {"num_params", header.num_params},
        {"world_size", header.world_size},
        {"hosts", header.hosts},
        {"ranks_per_host", header.ranks_per_host},
        {"dp", header.dp},
        {"tp", header.tp},
        {"sequence_parallel", header.sequence_parallel},
        {"pp", header.pp},
        {"zero_stage", header.zero_stage},
        {"compute_dtype", header.compute_dtype},
        {"tokens_per_step", header.tokens_per_step},
        {"gradient_accumulation_steps", header.gradient_accumulation_steps},
        {"config", header.config_path},
        {"cpu_kernels",
         {{"library", header.cpu_kernels.library},
          {"core", header.cpu_kernels.core},
          {"threads", header.cpu_kernels.threads},
          {"vector_isa", header.cpu_kernels.vector_isa}}},
    };
    if (!header.pipeline.empty()) j["pipeline"] = header.pipeline;
    if (header.shard_group_size > 0) j["shard_group_size"] = header.shard_group_size;
    if (!header.quantized.empty()) j["int8_communication"] = header.quantized;
    if (header.memory_plan.has_value()) {
      const MetricsHeader::MemoryPlanSummary& p = *header.memory_plan;
      j["memory_plan"] = {{"device", p.device},
                          {"host", p.host},
                          {"nvme", p.nvme},
                          {"resident", p.resident},
                          {"limit", p.limit}};
    }
    absl::Status s = w->WriteLine(j.dump());
    if (!s.ok()) return s;
  }
  return w;
}

absl::Status MetricsWriter::Write(const StepMetrics& m, const MemoryTracker& memory) {
  nlohmann::json mem = nlohmann::json::object();
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const MemoryCategory category = static_cast<MemoryCategory>(c);
    const MemoryUsage u = memory.Usage(category);
    mem[MemoryCategoryName(category)] = {{"current", u.current}, {"peak", u.peak}};
  }
  if (m.checkpoint_snapshot.has_value()) {
    mem["checkpoint_snapshot"] = {{"current", m.checkpoint_snapshot->current}, {"peak", m.checkpoint_snapshot->peak}};
  }
  nlohmann::json j = {
      {"step", m.step},
      {"loss", m.loss},
      {"lr", m.lr},
      {"grad_norm", m.grad_norm},
      {"loss_scale", m.loss_scale},
      {"skipped", m.skipped},
      {"tokens_per_s", m.tokens_per_s},
      {"step_ms", m.step_ms},
      {"comm_bytes", m.comm_bytes},
      {"comm_bytes_by_group", m.comm_bytes_by_group},
      {"inter_host_bytes", m.inter_host_bytes},
      {"mem", mem},
      {"io", {{"read_bytes", m.io.read_bytes}, {"write_bytes", m.io.write_bytes}, {"busy_ms", m.io.busy_ms}}},
  };
  if (m.val_loss.has_value()) j["val_loss"] = *m.val_loss;
  if (m.memory_plan.has_value()) {
    j["memory_plan"] = {{"planned_resident", m.memory_plan->planned_resident},
                        {"measured_peak_rss", m.memory_plan->measured_peak_rss}};
  }
  if (m.straggler.has_value()) {
    j["straggler"] = {{"slowest_rank", m.straggler->slowest_rank},
                      {"slowest_ms", m.straggler->slowest_ms},
                      {"median_ms", m.straggler->median_ms}};
  }
  return WriteLine(j.dump());
}

absl::Status MetricsWriter::WriteLine(const std::string& line) {
  if (std::fputs(line.c_str(), file_) < 0 || std::fputc('\n', file_) == EOF || std::fflush(file_) != 0) {
    return absl::InternalError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard

#include "engine/metrics_writer.h"

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

std::vector<nlohmann::json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(MetricsWriterTest, HeaderThenOneObjectPerStepWithEveryMemoryCategory) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/m.jsonl";
  MetricsHeader h;
  h.num_params = 1234;
  h.world_size = 4;
  h.hosts = 2;
  h.ranks_per_host = 2;
  h.dp = 2;
  h.tp = 2;
  h.sequence_parallel = true;
  h.zero_stage = 3;
  h.cpu_kernels = {"OpenBLAS 0.3.21", "Zen", 2, "avx2"};
  MemoryTracker mem;
  mem.Allocated(MemoryCategory::kParams, 100);
  mem.Allocated(MemoryCategory::kActivations, 50);
  mem.Freed(MemoryCategory::kActivations, 20);
  {
    auto w = MetricsWriter::Open(path, h, /*append=*/false);
    ASSERT_TRUE(w.ok()) << w.status();
    StepMetrics s;
    s.step = 1;
    s.loss = 2.5f;
    s.comm_bytes = 4096;
    s.comm_bytes_by_group = {{"dp", 4000}, {"tp", 96}};
    s.inter_host_bytes = 4000;
    ASSERT_TRUE((*w)->Write(s, mem).ok());
    s.step = 2;
    s.val_loss = 2.25f;
    ASSERT_TRUE((*w)->Write(s, mem).ok());
  }
  {  // A resumed run appends without a second header.
    auto w = MetricsWriter::Open(path, h, /*append=*/true);
    ASSERT_TRUE(w.ok());
    StepMetrics s;
    s.step = 3;
    ASSERT_TRUE((*w)->Write(s, mem).ok());
  }
  std::vector<nlohmann::json> lines = ReadLines(path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["num_params"], 1234);
  EXPECT_EQ(lines[0]["zero_stage"], 3);
  EXPECT_EQ(lines[0]["hosts"], 2);
  EXPECT_EQ(lines[0]["ranks_per_host"], 2);
  EXPECT_EQ(lines[0]["dp"], 2);
  EXPECT_EQ(lines[0]["tp"], 2);
  EXPECT_EQ(lines[0]["sequence_parallel"], true);
  EXPECT_EQ(lines[0]["compute_dtype"], "f32");
  EXPECT_EQ(lines[0]["cpu_kernels"],
            nlohmann::json({{"library", "OpenBLAS 0.3.21"}, {"core", "Zen"}, {"threads", 2}, {"vector_isa", "avx2"}}));
  EXPECT_EQ(lines[1]["step"], 1);
  EXPECT_EQ(lines[1]["loss"], 2.5);
  EXPECT_EQ(lines[1]["comm_bytes"], 4096);
  EXPECT_EQ(lines[1]["comm_bytes_by_group"]["dp"], 4000);
  EXPECT_EQ(lines[1]["comm_bytes_by_group"]["tp"], 96);
  EXPECT_EQ(lines[1]["inter_host_bytes"], 4000);
  EXPECT_FALSE(lines[1].contains("val_loss"));
  EXPECT_EQ(lines[2]["val_loss"], 2.25);
  EXPECT_EQ(lines[1]["mem"]["params"]["current"], 100);
  EXPECT_EQ(lines[1]["mem"]["activations"]["current"], 30);
  EXPECT_EQ(lines[1]["mem"]["activations"]["peak"], 50);
  EXPECT_EQ(lines[1]["mem"].size(), static_cast<size_t>(kNumMemoryCategories));
  // Every step line has the NVMe tier's I/O, zeros without it.
  EXPECT_EQ(lines[1]["io"]["read_bytes"], 0);
  EXPECT_EQ(lines[1]["io"]["write_bytes"], 0);
  EXPECT_EQ(lines[1]["io"]["busy_ms"], 0.0);
  EXPECT_EQ(lines[3]["step"], 3);
}

// The memory plan: per tier and the limit in the header, planned against
// measured on the step lines that carry it, absent where not given.
TEST(MetricsWriterTest, MemoryPlanInTheHeaderAndOnTheStepsThatCarryIt) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/plan.jsonl";
  MetricsHeader h;
  h.memory_plan = MetricsHeader::MemoryPlanSummary{1000, 200, 5000, 1200, 4096};
  MemoryTracker mem;
  {
    auto w = MetricsWriter::Open(path, h, /*append=*/false);
    ASSERT_TRUE(w.ok()) << w.status();
    StepMetrics s;
    s.step = 1;
    s.memory_plan = StepMetrics::MemoryPlanUse{1200, 1310};
    ASSERT_TRUE((*w)->Write(s, mem).ok());
    s.step = 2;
    s.memory_plan.reset();
    ASSERT_TRUE((*w)->Write(s, mem).ok());
  }
  std::vector<nlohmann::json> lines = ReadLines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["memory_plan"],
            nlohmann::json({{"device", 1000}, {"host", 200}, {"nvme", 5000}, {"resident", 1200}, {"limit", 4096}}));
  EXPECT_EQ(lines[1]["memory_plan"], nlohmann::json({{"planned_resident", 1200}, {"measured_peak_rss", 1310}}));
  EXPECT_FALSE(lines[2].contains("memory_plan"));
  // Without a plan the header has none either.
  const std::string bare = std::string(getenv("TEST_TMPDIR")) + "/bare.jsonl";
  ASSERT_TRUE(MetricsWriter::Open(bare, MetricsHeader{}, false).ok());
  EXPECT_FALSE(ReadLines(bare)[0].contains("memory_plan"));
}

TEST(MetricsWriterTest, UnwritablePathIsInternalNamingThePath) {
  auto w = MetricsWriter::Open("/nonexistent-dir/m.jsonl", MetricsHeader{}, false);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(w.status().message(), "/nonexistent-dir/m.jsonl: cannot open metrics file: No such file or directory");
}

}  // namespace
}  // namespace zeroshard

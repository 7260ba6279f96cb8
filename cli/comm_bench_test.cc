#include "cli/comm_bench.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

absl::StatusOr<CommBenchOptions> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "comm-bench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ParseCommBenchArgs(static_cast<int>(argv.size()), argv.data());
}

TEST(CommBenchArgsTest, Defaults) {
  auto o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->backend, "mpi");
  EXPECT_EQ(o->ops.size(), 4u);
  EXPECT_EQ(o->min_bytes, 1024);
  EXPECT_EQ(o->max_bytes, 16 << 20);
  EXPECT_EQ(o->iters, 20);
  EXPECT_EQ(o->warmup, 5);
  EXPECT_EQ(o->dtype, DType::kF32);
  EXPECT_EQ(o->group, "world");
  EXPECT_EQ(o->shape.dp, 0);  // derived from the world size later
}

TEST(CommBenchArgsTest, EveryFlag) {
  auto o = Parse({"--backend=nccl", "--ops", "reduce_scatter,all_reduce", "--min-bytes=8", "--max-bytes=64",
                  "--factor=2", "--iters=3", "--warmup=0", "--dtype=bf16", "--group=tp", "--dp=2", "--tp=2"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->backend, "nccl");
  ASSERT_EQ(o->ops.size(), 2u);
  EXPECT_EQ(o->ops[0], BenchOp::kReduceScatter);
  EXPECT_EQ(o->ops[1], BenchOp::kAllReduce);
  EXPECT_EQ(o->min_bytes, 8);
  EXPECT_EQ(o->max_bytes, 64);
  EXPECT_EQ(o->factor, 2);
  EXPECT_EQ(o->iters, 3);
  EXPECT_EQ(o->warmup, 0);
  EXPECT_EQ(o->dtype, DType::kBF16);
  EXPECT_EQ(o->group, "tp");
  EXPECT_EQ(o->shape.dp, 2);
  EXPECT_EQ(o->shape.tp, 2);
  EXPECT_EQ(o->shape.pp, 1);
}

TEST(CommBenchArgsTest, BadValuesNameTheFlag) {
  EXPECT_EQ(Parse({"--backend=gloo"}).status().message(), "--backend: 'gloo' is not mpi or nccl");
  EXPECT_EQ(Parse({"--ops=all_to_all"}).status().message(),
            "--ops: 'all_to_all' is not one of all_reduce, all_gather, reduce_scatter, broadcast");
  EXPECT_EQ(Parse({"--group=ep"}).status().message(), "--group: 'ep' is not world, dp, tp or pp");
  EXPECT_EQ(Parse({"--iters=0"}).status().message(), "--iters: 0 must be >= 1");
  EXPECT_EQ(Parse({"--min-bytes=64", "--max-bytes=8"}).status().message(),
            "--max-bytes 8 is smaller than --min-bytes 64");
  EXPECT_EQ(Parse({"--dtype=u16"}).status().message(), "--dtype: u16 cannot be reduced");
  EXPECT_EQ(Parse({"--dtype=i8"}).status().message(), "--dtype: i8 cannot be reduced");
  EXPECT_EQ(Parse({"--factor=1"}).status().message(), "--factor: 1 must be >= 2");
  EXPECT_EQ(Parse({"--bogus"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Parse({"extra"}).status().message(), "unexpected argument 'extra'");
}

TEST(CommBenchTest, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kBroadcast, 3), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllReduce, 1), 0.0);
}

TEST(CommBenchTest, SizesRoundDownToWholeElementsPerRank) {
  CommBenchOptions o;
  o.min_bytes = 10;
  o.max_bytes = 1000;
  o.factor = 4;
  // Quantum for 3 ranks of f32 is 12 bytes: 10 -> 0 (dropped), 40 -> 36,
  // 160 -> 156, 640 -> 636.
  EXPECT_EQ(BenchSizes(o, 3), (std::vector<int64_t>{36, 156, 636}));
  o.dtype = DType::kBF16;
  EXPECT_EQ(BenchSizes(o, 1), (std::vector<int64_t>{10, 40, 160, 640}));
}

}  // namespace
}  // namespace zeroshard::cli

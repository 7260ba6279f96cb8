#include "nn/tensor_parallel.h"

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

TensorView HostF32(std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kF32, std::move(shape), Device::kCpu};
}

// Runs fn(rank, parallel context) on one thread per rank of a "tp" group.
void RunRanks(int size, const std::function<void(int, const ParallelContext&)>& fn) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(size, "tp");
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ParallelContext par;
      par.tp = comms[r].get();
      par.tp_rank = r;
      par.tp_size = size;
      fn(r, par);
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(TensorParallelTest, AllReduceSumsInPlace) {
  RunRanks(3, [](int r, const ParallelContext& par) {
    std::vector<float> v = {1.0f * r, 10.0f * r + 1, -2.0f};
    ASSERT_TRUE(TpAllReduceSum(par, ComputeContext{}, HostF32(v, {3}), "x").ok());
    EXPECT_EQ(v, (std::vector<float>{3, 33, -6}));
  });
}

TEST(TensorParallelTest, AllGatherStacksRowsInRankOrderAlsoInPlace) {
  RunRanks(3, [](int r, const ParallelContext& par) {
    std::vector<float> in = {1.0f * r, 1.0f * r + 0.5f};  // one (1, 2) row per rank
    std::vector<float> out(6, -1.0f);
    ASSERT_TRUE(TpAllGatherRows(par, ComputeContext{}, HostF32(in, {1, 2}), HostF32(out, {3, 2}), "x").ok());
    const std::vector<float> want = {0, 0.5f, 1, 1.5f, 2, 2.5f};
    EXPECT_EQ(out, want);
    std::vector<float> inplace(6, -1.0f);
    const TensorView all = HostF32(inplace, {3, 2});
    const TensorView mine = TpRowSlice(all, r, 3);
    EXPECT_EQ(mine.shape, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(mine.data, inplace.data() + 2 * r);
    mine.as<float>()[0] = in[0];
    mine.as<float>()[1] = in[1];
    ASSERT_TRUE(TpAllGatherRows(par, ComputeContext{}, mine, all, "x").ok());
    EXPECT_EQ(inplace, want);
  });
}

TEST(TensorParallelTest, ReduceScatterGivesEachRankTheSumOfItsRows) {
  RunRanks(2, [](int r, const ParallelContext& par) {
    std::vector<float> in = {1.0f + r, 2.0f, 3.0f, 4.0f * r};  // (2 rows, 2)
    std::vector<float> out(2, -1.0f);
    ASSERT_TRUE(TpReduceScatterRows(par, ComputeContext{}, HostF32(in, {2, 2}), HostF32(out, {1, 2}), "x").ok());
    EXPECT_EQ(out, r == 0 ? (std::vector<float>{3, 4}) : (std::vector<float>{6, 4}));
  });
}

TEST(TensorParallelTest, SizeOneIssuesNothingAndCopies) {
  ParallelContext par;  // tp 1, no communicator
  std::vector<float> v = {1, 2}, out(2, 0.0f);
  ASSERT_TRUE(CheckTensorParallel(par, ComputeContext{}, "u").ok());
  EXPECT_TRUE(TpAllReduceSum(par, ComputeContext{}, HostF32(v, {2}), "x").ok());
  EXPECT_EQ(v, (std::vector<float>{1, 2}));
  EXPECT_TRUE(TpAllGatherRows(par, ComputeContext{}, HostF32(v, {1, 2}), HostF32(out, {1, 2}), "x").ok());
  EXPECT_EQ(out, v);
  out.assign(2, 0.0f);
  EXPECT_TRUE(TpReduceScatterRows(par, ComputeContext{}, HostF32(v, {1, 2}), HostF32(out, {1, 2}), "x").ok());
  EXPECT_EQ(out, v);
}

TEST(TensorParallelTest, LocalRows) {
  EXPECT_EQ(TpLocalRows(12, 4, "h.0 input").value(), 3);
  absl::StatusOr<int64_t> bad = TpLocalRows(10, 4, "h.0 input");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "h.0 input: 10 rows do not split evenly over tp 4");
}

TEST(TensorParallelTest, ChecksTheGroup) {
  ParallelContext par;
  par.tp_size = 2;
  absl::Status s = CheckTensorParallel(par, ComputeContext{}, "h.0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "h.0: tp size 2 but no tp communicator");
  par.tp_rank = 2;
  s = CheckTensorParallel(par, ComputeContext{}, "h.0");
  EXPECT_EQ(s.message(), "h.0: tp rank 2 of size 2, expected 0 <= rank < size");
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(3, "tp");
  par.tp = comms[1].get();
  par.tp_rank = 0;
  s = CheckTensorParallel(par, ComputeContext{}, "h.0");
  EXPECT_EQ(s.message(), "h.0: tp rank 0 of 2 but communicator 'tp' is rank 1 of 3");
}

TEST(TensorParallelTest, ErrorsNameTheTensorAndTheCollective) {
  RunRanks(2, [](int, const ParallelContext& par) {
    std::vector<float> in(4), out(4);
    absl::Status s = TpAllGatherRows(par, ComputeContext{}, HostF32(in, {2, 2}), HostF32(out, {2, 2}), "h.0.ln_1 out");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "h.0.ln_1 out: tp AllGather of f32[2, 2] into f32[2, 2], expected 2 times the input's elements");
    s = TpReduceScatterRows(par, ComputeContext{}, HostF32(in, {2, 2}), HostF32(out, {2, 2}), "h.0 grad");
    EXPECT_EQ(s.message(),
              "h.0 grad: tp ReduceScatter of f32[2, 2] into f32[2, 2], expected 2 times the output's elements");
    std::vector<int32_t> ints(2);
    s = TpAllReduceSum(par, ComputeContext{}, TensorView{ints.data(), DType::kI32, {2}, Device::kCpu}, "h.0 grad");
    EXPECT_EQ(s.message(), "h.0 grad: tp AllReduce of i32 into i32, expected one of f32, bf16, f16");
    // The communicator's own failure keeps its code, with what and which collective.
    std::vector<uint16_t> half(4);
    s = TpAllReduceSum(par, ComputeContext{}, TensorView{half.data(), DType::kBF16, {4}, Device::kCpu}, "h.0 y");
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(s.message(),
              "h.0 y: tp AllReduce on 'tp' (bf16, 4 elements) failed: ThreadCommunicator reduces f32 and i32, not "
              "bf16");
  });
}

}  // namespace
}  // namespace zeroshard

// HostOffload with the CPU device's memcpy queue: what it allocates and
// counts, the fetch → wait and push → order preconditions, the parameters
// it pushes rounded as the kernels round, and range checks.
#include "engine/host_offload.h"

#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "engine/host_transfers.h"
#include "gtest/gtest.h"
#include "kernels/context.h"

namespace zeroshard {
namespace {

std::unique_ptr<HostOffload> Make(MemoryTracker* tracker, DType compute, int kinds = 2) {
  absl::StatusOr<std::unique_ptr<HostOffload>> h =
      HostOffload::Create({5, 3}, kinds, compute, tracker, std::make_unique<MemcpyHostTransfers>());
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? std::move(*h) : nullptr;
}

TEST(HostOffloadTest, CountsMastersStateAndStagingInTheirCategoriesAndStartsZero) {
  MemoryTracker tracker;
  {
    std::unique_ptr<HostOffload> h = Make(&tracker, DType::kBF16);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(tracker.Usage(MemoryCategory::kMasterParams).current, (5 + 3) * 4);
    EXPECT_EQ(tracker.Usage(MemoryCategory::kOptimizerState).current, 2 * (5 + 3) * 4);
    // f32 gradient staging plus bf16 parameter staging.
    EXPECT_EQ(tracker.Usage(MemoryCategory::kOffloadStaging).current, (5 + 3) * (4 + 2));
    EXPECT_EQ(HostOffloadStagingBytes(5, DType::kBF16) + HostOffloadStagingBytes(3, DType::kBF16), (5 + 3) * 6);
    for (int r = 0; r < 2; ++r) {
      for (int64_t i = 0; i < h->numel(r); ++i) {
        EXPECT_EQ(h->master(r)[i], 0.0f);
        EXPECT_EQ(h->state(r, 0)[i], 0.0f);
        EXPECT_EQ(h->state(r, 1)[i], 0.0f);
      }
    }
  }
  for (MemoryCategory c :
       {MemoryCategory::kMasterParams, MemoryCategory::kOptimizerState, MemoryCategory::kOffloadStaging}) {
    EXPECT_EQ(tracker.Usage(c).current, 0) << MemoryCategoryName(c);
  }
}

TEST(HostOffloadTest, F32ComputeNeedsNoParameterStaging) {
  MemoryTracker tracker;
  std::unique_ptr<HostOffload> h = Make(&tracker, DType::kF32, /*kinds=*/1);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(tracker.Usage(MemoryCategory::kOffloadStaging).current, (5 + 3) * 4);
  EXPECT_EQ(HostOffloadStagingBytes(5, DType::kF32), 20);
}

TEST(HostOffloadTest, ATrackerLimitRefusesWithTheCategory) {
  MemoryTracker tracker;
  tracker.SetLimit(MemoryCategory::kOptimizerState, 40);
  absl::StatusOr<std::unique_ptr<HostOffload>> h =
      HostOffload::Create({5, 3}, 2, DType::kF32, &tracker, std::make_unique<MemcpyHostTransfers>());
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(h.status().message(), "optimizer_state")) << h.status();
  // Nothing stays counted after the failed Create.
  EXPECT_EQ(tracker.Usage(MemoryCategory::kMasterParams).current, 0);
  EXPECT_EQ(tracker.Usage(MemoryCategory::kOptimizerState).current, 0);
}

TEST(HostOffloadTest, FetchedGradientsArriveAndWaitingWithoutAFetchIsRefused) {
  MemoryTracker tracker;
  std::unique_ptr<HostOffload> h = Make(&tracker, DType::kF32);
  ASSERT_NE(h, nullptr);
  absl::Status s = h->WaitGrads(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "region 1's gradient was not fetched")) << s;
  const std::vector<float> device = {1.5f, -2.0f, 3.25f};
  EXPECT_FALSE(h->grads_fetched(1));
  ASSERT_TRUE(h->FetchGrads(1, device.data()).ok());
  EXPECT_TRUE(h->grads_fetched(1));
  ASSERT_TRUE(h->WaitGrads(1).ok());
  EXPECT_EQ(std::memcmp(h->grads(1), device.data(), 12), 0);
  // Drain forgets the step's copies.
  ASSERT_TRUE(h->Drain().ok());
  EXPECT_FALSE(h->grads_fetched(1));
  EXPECT_EQ(h->WaitGrads(1).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HostOffloadTest, PushRoundsTheMasterToTheComputeDtypeNearestEven) {
  MemoryTracker tracker;
  std::unique_ptr<HostOffload> h = Make(&tracker, DType::kBF16);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->OrderParams(0).code(), absl::StatusCode::kFailedPrecondition);
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even 1.0;
  // 1 + 3·2^-8 rounds up to 1 + 2^-6.
  const std::vector<float> master = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -7.0f, 0.0f, 65504.0f};
  ASSERT_TRUE(h->Write(0, -1, 0, 5, master.data()).ok());
  std::vector<uint16_t> device(5, 0xFFFF);
  ASSERT_TRUE(h->PushParams(0, device.data(), kernels::KernelContext::Cpu(1)).ok());
  ASSERT_TRUE(h->OrderParams(0).ok());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(device[i], F32ToBF16(master[i])) << i;
  }
  EXPECT_EQ(device[0], F32ToBF16(1.0f));
  EXPECT_EQ(device[1], F32ToBF16(1.0f + 1.0f / 64));
}

TEST(HostOffloadTest, ReadAndWriteCheckTheirRange) {
  MemoryTracker tracker;
  std::unique_ptr<HostOffload> h = Make(&tracker, DType::kF32);
  ASSERT_NE(h, nullptr);
  const std::vector<float> in = {4.0f, 5.0f};
  ASSERT_TRUE(h->Write(0, 1, 3, 2, in.data()).ok());
  std::vector<float> out(2, 0.0f);
  ASSERT_TRUE(h->Read(0, 1, 3, 2, out.data()).ok());
  EXPECT_EQ(out, in);
  EXPECT_EQ(h->state(0, 1)[4], 5.0f);
  absl::Status s = h->Read(1, 0, 2, 2, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "host offload: elements [2, 4) outside region 1's 3");
  EXPECT_EQ(h->Read(0, 2, 0, 1, out.data()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MemcpyHostTransfersTest, RefusesATicketNeverIssued) {
  MemcpyHostTransfers t;
  float a = 1.0f, b = 0.0f;
  absl::StatusOr<int64_t> ticket = t.ToHost(&b, &a, sizeof(float));
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(*ticket, 0);
  EXPECT_EQ(b, 1.0f);
  EXPECT_TRUE(t.WaitOnHost(0).ok());
  absl::Status s = t.OrderCompute(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "host transfer ticket 1 was never issued; expected one in [0, 1)");
}

}  // namespace
}  // namespace zeroshard

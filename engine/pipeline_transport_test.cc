// PipelineTransport between two stages over an in-process mailbox: a pack's
// tensors arrive with their dtypes, shapes and values in the receiver's
// slot, whichever order the progress finds them in; the errors.
#include "engine/pipeline_transport.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Point-to-point messages by (from, to, tag): a send is buffered and
// complete at once; a receive completes once its message is there.
using Mailbox = std::map<std::tuple<int, int, int>, std::vector<char>>;

class DoneWork final : public Work {
 public:
  explicit DoneWork(absl::Status status) : status_(std::move(status)) {}
  bool IsCompleted() override { return true; }
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  absl::Status status_;
};

class MailboxRecv final : public Work {
 public:
  MailboxRecv(Mailbox* box, std::tuple<int, int, int> key, void* buf, size_t bytes)
      : box_(box), key_(key), buf_(buf), bytes_(bytes) {}
  bool IsCompleted() override { return box_->count(key_) > 0; }
  absl::Status Wait(absl::Duration) override {
    auto it = box_->find(key_);
    if (it == box_->end()) return absl::DeadlineExceededError("nothing was sent with this tag");
    if (it->second.size() != bytes_) return absl::DataLossError("message size differs from the receive's");
    std::memcpy(buf_, it->second.data(), bytes_);
    box_->erase(it);
    return absl::OkStatus();
  }

 private:
  Mailbox* box_;
  std::tuple<int, int, int> key_;
  void* buf_;
  size_t bytes_;
};

class MailboxCommunicator final : public Communicator {
 public:
  MailboxCommunicator(Mailbox* box, int rank) : box_(box), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const std::string& name() const override { return name_; }
  Device device() const override { return Device::kCpu; }
  std::unique_ptr<Work> Send(const void* buf, int64_t count, DType dtype, int peer, int tag) override {
    const char* p = static_cast<const char*>(buf);
    (*box_)[{rank_, peer, tag}].assign(p, p + count * DTypeSize(dtype));
    return std::make_unique<DoneWork>(absl::OkStatus());
  }
  std::unique_ptr<Work> Recv(void* buf, int64_t count, DType dtype, int peer, int tag) override {
    return std::make_unique<MailboxRecv>(box_, std::make_tuple(peer, rank_, tag), buf,
                                         static_cast<size_t>(count * DTypeSize(dtype)));
  }
  std::unique_ptr<Work> AllGather(const void*, void*, int64_t, DType) override { return Unsupported(); }
  std::unique_ptr<Work> ReduceScatter(const void*, void*, int64_t, DType, ReduceOp) override { return Unsupported(); }
  std::unique_ptr<Work> AllToAll(const void*, void*, int64_t, DType) override { return Unsupported(); }
  std::unique_ptr<Work> AllReduce(void*, int64_t, DType, ReduceOp) override { return Unsupported(); }
  std::unique_ptr<Work> Broadcast(void*, int64_t, DType, int) override { return Unsupported(); }
  std::unique_ptr<Work> Barrier() override { return Unsupported(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int, const std::string&) override {
    return absl::UnimplementedError("MailboxCommunicator::Split");
  }
  CommStats Stats() const override { return CommStats(); }

 private:
  static std::unique_ptr<Work> Unsupported() {
    return std::make_unique<DoneWork>(absl::UnimplementedError("MailboxCommunicator: point-to-point only"));
  }

  Mailbox* box_;
  int rank_;
  std::string name_ = "pp";
};

constexpr int kUnits = 3;
constexpr int kMicroBatches = 2;

Action Transfer(ActionKind kind, int micro_batch, int unit, int peer) {
  Action a;
  a.kind = kind;
  a.micro_batch = micro_batch;
  a.unit = unit;
  a.peer_stage = peer;
  return a;
}

// The stage below posts its unit's output and the stage above its receive,
// in either order; the payload is posted once the header is seen.
class PipelineTransportOrderTest : public ::testing::TestWithParam<bool> {};

TEST_P(PipelineTransportOrderTest, ActivationsArriveWhereTheUnitBelowLeavesItsOutput) {
  const bool receive_first = GetParam();
  Mailbox box;
  MailboxCommunicator below_comm(&box, 0), above_comm(&box, 1);
  MemoryTracker tracker;
  ComputeContext compute;
  PipelineTransport below(&below_comm, &tracker, Device::kCpu, &compute, nullptr, kUnits, kMicroBatches);
  PipelineTransport above(&above_comm, &tracker, Device::kCpu, &compute, nullptr, kUnits, kMicroBatches);
  PipelineTransfers sends, receives;

  ActivationPack pack;
  Buffer a = Buffer::Allocate(&tracker, MemoryCategory::kActivations, Device::kCpu, DType::kF32, 6).value();
  for (int i = 0; i < 6; ++i) a.as<float>()[i] = 0.5f * i;
  Buffer b = Buffer::Allocate(&tracker, MemoryCategory::kActivations, Device::kCpu, DType::kI32, 4).value();
  for (int i = 0; i < 4; ++i) b.as<int32_t>()[i] = 10 + i;
  pack.Add(std::move(a), {2, 3});
  pack.Add(std::move(b), {4});

  const Action send = Transfer(ActionKind::kSendAct, 1, 1, /*peer=*/1);
  const Action recv = Transfer(ActionKind::kRecvAct, 1, 2, /*peer=*/0);
  if (receive_first) {
    ASSERT_TRUE(above.PostReceive(recv, &receives).ok());
    ASSERT_TRUE(above.Progress(&receives).ok());  // no header yet: nothing to post
    ASSERT_FALSE(receives.receives.begin()->second->payload_posted);
    ASSERT_TRUE(below.PostSend(send, &pack, &sends).ok());
    ASSERT_TRUE(above.Progress(&receives).ok());
    EXPECT_TRUE(receives.receives.begin()->second->payload_posted);
  } else {
    ASSERT_TRUE(below.PostSend(send, &pack, &sends).ok());
    ASSERT_TRUE(above.PostReceive(recv, &receives).ok());
  }
  EXPECT_TRUE(pack.empty());  // the send owns it until it completed
  ASSERT_TRUE(below.Progress(&sends).ok());
  EXPECT_TRUE(sends.sends.empty());  // completed sends are freed at once

  ActivationPack slot;
  double waited = 0;
  ASSERT_TRUE(above.CompleteReceive(kTransferActivations, 1, 2, &receives, &slot, &waited).ok());
  EXPECT_TRUE(receives.empty());
  EXPECT_TRUE(below.Finish(&sends).ok());
  EXPECT_TRUE(above.Finish(&receives).ok());
  EXPECT_TRUE(box.empty());
  ASSERT_EQ(slot.size(), 2);
  EXPECT_EQ(slot.shape(0), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(slot.shape(1), (std::vector<int64_t>{4}));
  const std::vector<TensorView> views = slot.views();
  EXPECT_EQ(views[0].dtype, DType::kF32);
  EXPECT_EQ(views[1].dtype, DType::kI32);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<const float*>(views[0].data)[i], 0.5f * i);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(static_cast<const int32_t*>(views[1].data)[i], 10 + i);
  EXPECT_GE(waited, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Orders, PipelineTransportOrderTest, ::testing::Bool());

TEST(PipelineTransportTest, AReceiveNeverConsumedIsAnInternalError) {
  Mailbox box;
  MailboxCommunicator comm(&box, 1);
  MemoryTracker tracker;
  ComputeContext compute;
  PipelineTransport transport(&comm, &tracker, Device::kCpu, &compute, nullptr, kUnits, kMicroBatches);
  PipelineTransfers transfers;
  ASSERT_TRUE(transport.PostReceive(Transfer(ActionKind::kRecvGrad, 0, 1, /*peer=*/0), &transfers).ok());
  const absl::Status s = transport.Finish(&transfers);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "1 pipeline receive(s) were posted and never used");
}

TEST(PipelineTransportTest, NothingPostedLeavesTheSlotAlone) {
  MemoryTracker tracker;
  ComputeContext compute;
  PipelineTransport transport(nullptr, &tracker, Device::kCpu, &compute, nullptr, kUnits, kMicroBatches);
  PipelineTransfers transfers;
  ActivationPack slot;
  slot.Add(Buffer::Allocate(&tracker, MemoryCategory::kActivations, Device::kCpu, DType::kF32, 1).value(), {1});
  EXPECT_TRUE(transport.CompleteReceive(kTransferGradients, 0, 1, &transfers, &slot, nullptr).ok());
  EXPECT_EQ(slot.size(), 1);
  EXPECT_TRUE(transport.Finish(&transfers).ok());
}

TEST(PipelineTransportTest, WithoutAPipelineCommunicatorTransfersFail) {
  MemoryTracker tracker;
  ComputeContext compute;
  PipelineTransport transport(nullptr, &tracker, Device::kCpu, &compute, nullptr, kUnits, kMicroBatches);
  PipelineTransfers transfers;
  ActivationPack pack;
  const absl::Status send = transport.PostSend(Transfer(ActionKind::kSendGrad, 0, 1, 0), &pack, &transfers);
  EXPECT_EQ(send.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(send.message(), "a SEND action without a pp communicator");
  const absl::Status recv = transport.PostReceive(Transfer(ActionKind::kRecvGrad, 0, 1, 0), &transfers);
  EXPECT_EQ(recv.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(transfers.empty());
}

TEST(PipelineTransportTest, TagsAreDistinctPerTransferAndBounded) {
  EXPECT_EQ(TransferKindOf(ActionKind::kSendAct), kTransferActivations);
  EXPECT_EQ(TransferKindOf(ActionKind::kRecvAct), kTransferActivations);
  EXPECT_EQ(TransferKindOf(ActionKind::kSendGrad), kTransferGradients);
  EXPECT_EQ(TransferKindOf(ActionKind::kRecvGrad), kTransferGradients);
  std::vector<int> tags;
  for (TransferKind kind : {kTransferActivations, kTransferGradients}) {
    for (int m = 0; m < kMicroBatches; ++m) {
      for (int u = 0; u < kUnits; ++u) tags.push_back(PipelineTransferTag(kind, m, u, kUnits, kMicroBatches).value());
    }
  }
  for (size_t i = 1; i < tags.size(); ++i) EXPECT_EQ(tags[i], tags[i - 1] + 8);
  const absl::StatusOr<int> too_many = PipelineTransferTag(kTransferGradients, 0, 0, 4096, 1);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(too_many.status().message(), "use fewer micro-batches per step"));
}

}  // namespace
}  // namespace zeroshard

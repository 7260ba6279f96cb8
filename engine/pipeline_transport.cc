#include "engine/pipeline_transport.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "core/stopwatch.h"

namespace zeroshard {
namespace {

constexpr int kHeaderWords = 64;
constexpr int kMaxTag = 32767;

absl::StatusOr<std::vector<int32_t>> EncodeHeader(const ActivationPack& pack) {
  std::vector<int32_t> h(kHeaderWords, 0);
  if (pack.size() > 7) {
    return absl::InvalidArgumentError(absl::StrCat("a pipeline transfer carries ", pack.size(), " tensors, at most 7"));
  }
  int at = 0;
  h[at++] = pack.size();
  const std::vector<TensorView> views = pack.views();
  for (const TensorView& v : views) {
    if (at + 2 + static_cast<int>(v.shape.size()) > kHeaderWords) {
      return absl::InvalidArgumentError("a pipeline transfer's shapes do not fit its header");
    }
    h[at++] = static_cast<int32_t>(v.dtype);
    h[at++] = static_cast<int32_t>(v.shape.size());
    for (int64_t d : v.shape) h[at++] = static_cast<int32_t>(d);
  }
  return h;
}

}  // namespace

TransferKind TransferKindOf(ActionKind kind) {
  return kind == ActionKind::kSendAct || kind == ActionKind::kRecvAct ? kTransferActivations : kTransferGradients;
}

// One block of (1 + tensors) tags per (kind, micro-batch, unit).
absl::StatusOr<int> PipelineTransferTag(TransferKind kind, int micro_batch, int unit, int units, int micro_batches) {
  const int64_t slot = (static_cast<int64_t>(kind) * micro_batches + micro_batch) * units + unit;
  const int64_t tag = slot * 8;  // header + up to 7 tensors
  if (tag + 8 > kMaxTag) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline transfer tag ", tag, " exceeds ", kMaxTag, " (", units,
                                                   " units x ", micro_batches,
                                                   " micro-batches): use fewer micro-batches per step"));
  }
  return static_cast<int>(tag);
}

absl::Status PipelineTransport::PostSend(const Action& a, ActivationPack* pack, PipelineTransfers* transfers) {
  if (pp_ == nullptr) return absl::FailedPreconditionError("a SEND action without a pp communicator");
  const TransferKind kind = TransferKindOf(a.kind);
  auto send = std::make_unique<TransferSend>();
  send->pack = std::move(*pack);
  ASSIGN_OR_RETURN(send->header, EncodeHeader(send->pack));
  // Tags name the unit whose output (or its gradient) crosses: SEND_ACT's
  // own unit; SEND_GRAD's unit below.
  const int boundary = kind == kTransferActivations ? a.unit : a.unit - 1;
  ASSIGN_OR_RETURN(const int tag, PipelineTransferTag(kind, a.micro_batch, boundary, units_, micro_batches_));
  void* header = send->header.data();
  if (pp_->device() != Device::kCpu) {
    ASSIGN_OR_RETURN(send->header_device, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, pp_->device(),
                                                           DType::kI32, kHeaderWords));
    RETURN_IF_ERROR(DeviceCopy(send->header_device.data(), pp_->device(), send->header.data(), Device::kCpu,
                               kHeaderWords * sizeof(int32_t)));
    header = send->header_device.data();
  }
  send->works.push_back(pp_->Send(header, kHeaderWords, DType::kI32, a.peer_stage, tag));
  std::vector<TensorView> views = send->pack.views();
  for (size_t i = 0; i < views.size(); ++i) {
    send->works.push_back(
        pp_->Send(views[i].data, views[i].numel(), views[i].dtype, a.peer_stage, tag + 1 + static_cast<int>(i)));
  }
  transfers->sends.push_back(std::move(send));
  return absl::OkStatus();
}

absl::Status PipelineTransport::PostReceive(const Action& a, PipelineTransfers* transfers) {
  if (pp_ == nullptr) return absl::FailedPreconditionError("a RECV action without a pp communicator");
  const TransferKind kind = TransferKindOf(a.kind);
  auto recv = std::make_unique<TransferReceive>();
  recv->peer = a.peer_stage;
  // RECV_ACT's unit takes the output of the unit below; RECV_GRAD's unit
  // takes the gradient of its own output.
  const int boundary = kind == kTransferActivations ? a.unit - 1 : a.unit;
  ASSIGN_OR_RETURN(recv->tag, PipelineTransferTag(kind, a.micro_batch, boundary, units_, micro_batches_));
  recv->header.assign(kHeaderWords, 0);
  void* header = recv->header.data();
  if (pp_->device() != Device::kCpu) {
    ASSIGN_OR_RETURN(recv->header_device, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, pp_->device(),
                                                           DType::kI32, kHeaderWords));
    header = recv->header_device.data();
  }
  recv->header_work = pp_->Recv(header, kHeaderWords, DType::kI32, recv->peer, recv->tag);
  transfers->receives[{static_cast<int>(kind), a.micro_batch, a.unit}] = std::move(recv);
  return absl::OkStatus();
}

absl::Status PipelineTransport::PostPayload(TransferReceive& r) {
  Communicator& pp = *pp_;
  if (!r.header_device.empty()) {  // arrived (the receive completed): to the host
    RETURN_IF_ERROR(
        DeviceCopy(r.header.data(), Device::kCpu, r.header_device.data(), pp.device(), kHeaderWords * sizeof(int32_t)));
    r.header_device.Reset();
  }
  const std::vector<int32_t>& h = r.header;
  int at = 0;
  const int tensors = h[at++];
  if (tensors < 0 || tensors > 7) {
    return absl::DataLossError(
        absl::StrCat("pipeline transfer header from stage ", r.peer, " lists ", tensors, " tensors"));
  }
  for (int i = 0; i < tensors; ++i) {
    const DType dtype = static_cast<DType>(h[at++]);
    const int rank = h[at++];
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (int d = 0; d < rank; ++d) {
      shape.push_back(h[at++]);
      numel *= shape.back();
    }
    ASSIGN_OR_RETURN(Buffer buf, Buffer::Allocate(tracker_, MemoryCategory::kActivations, device_, dtype, numel));
    r.payload.push_back(pp.Recv(buf.data(), numel, dtype, r.peer, r.tag + 1 + i));
    r.pack.Add(std::move(buf), std::move(shape));
  }
  r.payload_posted = true;
  return absl::OkStatus();
}

absl::Status PipelineTransport::Progress(PipelineTransfers* transfers) {
  for (auto& [key, r] : transfers->receives) {
    if (!r->payload_posted && r->header_work->IsCompleted()) {
      RETURN_IF_ERROR(r->header_work->Wait());
      RETURN_IF_ERROR(PostPayload(*r));
    }
  }
  // A completed send's buffers go back at once: a step holds the sends in
  // flight, not one per micro-batch.
  auto done = [](const std::unique_ptr<TransferSend>& send) {
    for (const auto& w : send->works) {
      if (!w->IsCompleted()) return false;
    }
    return true;
  };
  std::vector<std::unique_ptr<TransferSend>>& sends = transfers->sends;
  for (auto it = sends.begin(); it != sends.end();) {
    if (!done(*it)) {
      ++it;
      continue;
    }
    for (auto& w : (*it)->works) RETURN_IF_ERROR(w->Wait());
    it = sends.erase(it);
  }
  return absl::OkStatus();
}

absl::Status PipelineTransport::CompleteReceive(TransferKind kind, int micro_batch, int unit,
                                                PipelineTransfers* transfers, ActivationPack* slot,
                                                double* wait_seconds) {
  auto it = transfers->receives.find({static_cast<int>(kind), micro_batch, unit});
  if (it == transfers->receives.end()) return absl::OkStatus();
  TransferReceive& r = *it->second;
  const SteadyClock::time_point waited = SteadyClock::now();
  if (!r.payload_posted) {
    RETURN_IF_ERROR(WaitTraced(*r.header_work, timeline_, "wait", "Recv", "header", std::chrono::steady_clock::now(),
                               kHeaderWords * 4));
    RETURN_IF_ERROR(PostPayload(r));
  }
  // The consuming unit runs on the compute stream: it waits there.
  for (auto& w : r.payload) RETURN_IF_ERROR(w->WaitOn(compute_->kernels.cuda_stream));
  if (wait_seconds != nullptr) *wait_seconds += SecondsSince(waited);
  *slot = std::move(r.pack);
  transfers->receives.erase(it);
  return absl::OkStatus();
}

absl::Status PipelineTransport::Finish(PipelineTransfers* transfers) {
  absl::Status first;
  for (auto& send : transfers->sends) {
    for (auto& w : send->works) {
      absl::Status s = w->Wait();
      if (first.ok()) first = s;
    }
  }
  transfers->sends.clear();
  if (first.ok() && !transfers->receives.empty()) {
    first = absl::InternalError(
        absl::StrCat(transfers->receives.size(), " pipeline receive(s) were posted and never used"));
  }
  return first;
}

}  // namespace zeroshard

// PipelineTransport: the pipeline's SEND_ACT/RECV_ACT and SEND_GRAD/RECV_GRAD
// on the pp communicator. A unit pack's tensors go to the neighbouring stage
// as a header — tensor count, then dtype, rank and dimensions of each —
// followed by one message per tensor. A RECV_* posts the header's receive;
// the payload's receives are posted as soon as the header has arrived
// (Progress, after every action), and the consuming FORWARD or BACKWARD
// waits for them (CompleteReceive). Sends are waited at the end of the
// program (Finish). On a device pp communicator (NCCL, staged MPI) the
// header travels in a small device buffer and is copied to the host once it
// arrived.
//
// Every transfer of a step has its own tags, so posted receives never match
// the wrong message whatever order they complete in. Thread-compatible; the
// communicator, tracker, compute context and timeline must outlive it.
#ifndef ZEROSHARD_ENGINE_PIPELINE_TRANSPORT_H_
#define ZEROSHARD_ENGINE_PIPELINE_TRANSPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/buffer.h"
#include "core/device.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "engine/step_program.h"
#include "nn/unit.h"

namespace zeroshard {

// What crosses: a unit's output (SEND_ACT/RECV_ACT) or its gradient
// (SEND_GRAD/RECV_GRAD).
enum TransferKind { kTransferActivations = 0, kTransferGradients = 1 };

// The kind of a SEND_* or RECV_* action.
TransferKind TransferKindOf(ActionKind kind);

// The header's tag of the transfer (kind, micro-batch, boundary unit); tensor
// i uses tag + 1 + i. kInvalidArgument when it exceeds the communicator's
// tag range (too many units times micro-batches).
absl::StatusOr<int> PipelineTransferTag(TransferKind kind, int micro_batch, int unit, int units, int micro_batches);

struct TransferReceive {
  int peer = 0;
  int tag = 0;  // the header's; tensor i uses tag + 1 + i
  std::vector<int32_t> header;
  Buffer header_device;  // where it lands on a device pp communicator
  std::unique_ptr<Work> header_work;
  bool payload_posted = false;
  ActivationPack pack;  // allocated once the header arrived
  std::vector<std::unique_ptr<Work>> payload;
};

struct TransferSend {
  std::vector<int32_t> header;
  Buffer header_device;  // its device copy on a device pp communicator
  ActivationPack pack;   // kept alive until the sends completed
  std::vector<std::unique_ptr<Work>> works;
};

// The transfers of one run: receives posted and not consumed yet, keyed by
// (kind, micro-batch, unit); sends not known complete.
struct PipelineTransfers {
  bool empty() const { return receives.empty() && sends.empty(); }

  std::map<std::tuple<int, int, int>, std::unique_ptr<TransferReceive>> receives;
  std::vector<std::unique_ptr<TransferSend>> sends;
};

class PipelineTransport {
 public:
  // `pp` may be null (no pipeline): every action then fails. Received
  // tensors are allocated on `device`; consumers wait on compute's stream.
  PipelineTransport(Communicator* pp, MemoryTracker* tracker, Device device, const ComputeContext* compute,
                    Timeline* timeline, int units, int micro_batches)
      : pp_(pp),
        tracker_(tracker),
        device_(device),
        compute_(compute),
        timeline_(timeline),
        units_(units),
        micro_batches_(micro_batches) {}

  // SEND_ACT / SEND_GRAD: posts *pack (moved from: the sends own it until
  // they completed) to the action's peer stage.
  absl::Status PostSend(const Action& action, ActivationPack* pack, PipelineTransfers* transfers);
  // RECV_ACT / RECV_GRAD: posts the header's receive.
  absl::Status PostReceive(const Action& action, PipelineTransfers* transfers);
  // Posts the payloads of receives whose headers arrived and frees the sends
  // that completed (no blocking).
  absl::Status Progress(PipelineTransfers* transfers);
  // Waits for the receive (kind, micro-batch, unit), if one was posted, and
  // moves its tensors into *slot; the time waited is added to *wait_seconds
  // (may be null). OK and *slot untouched when none was posted.
  absl::Status CompleteReceive(TransferKind kind, int micro_batch, int unit, PipelineTransfers* transfers,
                               ActivationPack* slot, double* wait_seconds);
  // Waits for every send; kInternal when a posted receive was never used.
  absl::Status Finish(PipelineTransfers* transfers);

 private:
  // Allocates a received header's tensors and posts their receives.
  absl::Status PostPayload(TransferReceive& r);

  Communicator* pp_;
  MemoryTracker* tracker_;
  Device device_;
  const ComputeContext* compute_;
  Timeline* timeline_;
  int units_;
  int micro_batches_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PIPELINE_TRANSPORT_H_

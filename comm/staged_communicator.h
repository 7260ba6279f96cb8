// A communicator over device buffers that moves them through a host
// backend (MPI): inputs are copied into page-locked host staging at issue
// time, the host collective runs, and Wait copies the result back to the
// device. The fallback when NCCL cannot serve (ranks sharing one GPU, or
// engine.comm.backend: MPI with CUDA); its cost is two copies across PCIe
// per collective and a host that blocks on the copy-in.
//
// Staging blocks come from a pool owned by the communicator and are reused
// by later operations of the same size; they are freed with it. Split gives
// a staged communicator over the host one's split.
#ifndef ZEROSHARD_COMM_STAGED_COMMUNICATOR_H_
#define ZEROSHARD_COMM_STAGED_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/device.h"

namespace zeroshard {

// Wraps `host` (a communicator over kCpu buffers) so that it takes buffers
// on `device`. With device kCpu the copies are plain memcpy (what the
// conformance suite runs on machines without a GPU).
// kInvalidArgument when `host` is not a host communicator.
absl::StatusOr<std::unique_ptr<Communicator>> CreateStagedCommunicator(std::unique_ptr<Communicator> host,
                                                                        Device device);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_STAGED_COMMUNICATOR_H_

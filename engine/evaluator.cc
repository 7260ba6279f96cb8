#include "engine/evaluator.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/status_agreement.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "nn/param_spec.h"

namespace zeroshard {

absl::StatusOr<EvalResult> Evaluator::Evaluate(const Batch& batch) {
  RETURN_IF_ERROR(res_->CheckUsable());
  TraceScope span(res_->timeline.get(), "pass", "eval pass");
  absl::Status local = batch.Validate();
  for (const NamedTensor& t : batch.tensors()) {
    if (local.ok() && t.view.device != Device::kCpu) {
      local = absl::InvalidArgumentError(absl::StrCat("batch tensor '", t.name, "' is on ", DeviceName(t.view.device),
                                                      ", expected host (cpu) memory"));
    }
  }
  std::vector<Buffer> batch_storage;
  std::vector<Batch> device_batch;
  if (local.ok()) local = res_->StageBatches({&batch, 1}, &batch_storage, &device_batch);
  double nominal = 0;
  RETURN_IF_ERROR(executor_->AgreeOnBatches({&batch, 1}, local, &nominal));
  RunContext run;
  run.batches = EngineResources::BatchesToRun({&batch, 1}, device_batch);
  run.training = false;
  absl::Status s = executor_->RunProgram(res_->plan.eval, &run);
  if (state_->param_store() != nullptr) {
    // A failed read of a parameter shard gathered garbage on this rank:
    // every rank fails the evaluation with it.
    absl::Status io = AgreeAcrossRanksSharingError(*res_->comms.control, state_->param_store()->status(),
                                                   "the evaluation's NVMe offload I/O");
    if (s.ok()) s = io;
  }
  // A tp group's ranks hold the same loss terms: counted once.
  absl::StatusOr<LossTerms> resolved =
      run.losses.empty() || res_->tp_rank() != 0 ? LossTerms() : ResolveLossTerms(run.losses[0]);
  if (s.ok()) s = resolved.status();
  const LossTerms terms = resolved.ok() ? *resolved : LossTerms();
  std::vector<float> sums(2 + 2 * res_->plan.metric_names.size(), 0.0f);
  if (s.ok()) {
    sums[0] = static_cast<float>(terms.loss.sum);
    sums[1] = static_cast<float>(terms.loss.weight);
    for (size_t i = 0; i < res_->plan.metric_names.size() && i < terms.metrics.size(); ++i) {
      sums[2 + 2 * i] = static_cast<float>(terms.metrics[i].sum);
      sums[3 + 2 * i] = static_cast<float>(terms.metrics[i].weight);
    }
    const auto issued = std::chrono::steady_clock::now();
    const int64_t n = static_cast<int64_t>(sums.size());
    s = res_->HostCollective(
        *res_->comms.world, sums.data(), n, sums.data(), n,
        [&](const void*, void* buf) { return res_->comms.world->AllReduce(buf, n, DType::kF32, ReduceOp::kSum); },
        [&](Work& w) {
          return WaitTraced(w, res_->timeline.get(), "allreduce", "AllReduce", "eval loss", issued,
                            n * static_cast<int64_t>(sizeof(float)));
        });
  }
  if (!s.ok()) {
    res_->broken = s;
    return s;
  }
  EvalResult result;
  result.loss = sums[0] / sums[1];
  result.loss_weight = sums[1];
  for (size_t i = 0; i < res_->plan.metric_names.size(); ++i) {
    result.metrics.push_back({res_->plan.metric_names[i], static_cast<double>(sums[2 + 2 * i]) / sums[3 + 2 * i]});
  }
  return result;
}

absl::StatusOr<std::vector<float>> Evaluator::GatherParam(absl::string_view name) {
  RETURN_IF_ERROR(res_->CheckUsable());
  for (int u = 0; u < res_->num_units(); ++u) {
    absl::StatusOr<int> p = res_->plan.layouts[u].FindParam(name);
    if (!p.ok()) continue;
    const FlatParamInfo& info = res_->plan.layouts[u].params()[*p];
    std::vector<float> out(info.numel);
    // The stage that computes the unit gathers it over its dp group (every
    // rank allocating first and agreeing, so a rank that cannot leaves none
    // waiting in the gather); the other stages receive it by broadcast.
    const bool source = res_->plan.units[u].computed;
    absl::StatusOr<Buffer> full = absl::StatusOr<Buffer>(Buffer());
    if (source && res_->options.zero.shards_master()) {
      full = Buffer::Allocate(&res_->tracker, MemoryCategory::kWorkspace, res_->device(), DType::kF32,
                              res_->plan.layouts[u].padded_numel());
    }
    RETURN_IF_ERROR(AgreeAcrossRanks(*res_->comms.control, full.status(), absl::StrCat("GatherParam('", name, "')")));
    absl::Status s;
    if (source) {
      UnitShard& shard = *state_->unit_shard(u);
      // A master on the NVMe tier is read from its file (a cpu device), one
      // in host memory beside a GPU copied to the device for the
      // all-gather; the all-gather runs whatever the read gave.
      std::vector<float> streamed;
      const bool off_device = state_->master_streams(u) || state_->master_on_host(u);
      if (off_device) {
        streamed.assign(static_cast<size_t>(shard.master_numel()), 0.0f);
        s = state_->ReadMaster(u, 0, shard.master_numel(), streamed.data());
      }
      const float* master = streamed.empty() ? shard.master() : streamed.data();
      Buffer on_device;
      if (off_device && res_->device() != Device::kCpu && res_->options.zero.shards_master() && s.ok()) {
        absl::StatusOr<Buffer> b = Buffer::Allocate(&res_->tracker, MemoryCategory::kWorkspace, res_->device(),
                                                    DType::kF32, shard.master_numel());
        s = b.status();
        if (s.ok()) {
          on_device = std::move(*b);
          s = DeviceCopy(on_device.data(), res_->device(), streamed.data(), Device::kCpu,
                         streamed.size() * sizeof(float));
          master = on_device.as<float>();
        }
      }
      if (!res_->options.zero.shards_master()) {
        if (s.ok()) {
          s = DeviceCopy(out.data(), Device::kCpu, master + info.offset, off_device ? Device::kCpu : res_->device(),
                         info.numel * sizeof(float));
        }
      } else {
        absl::Status gathered =
            res_->comms.dp->AllGather(master, full->data(), res_->plan.layouts[u].shard_numel(), DType::kF32)->Wait();
        if (s.ok()) s = gathered;
        if (s.ok()) {
          s = DeviceCopy(out.data(), Device::kCpu, full->as<float>() + info.offset, res_->device(),
                         info.numel * sizeof(float));
        }
      }
    }
    if (s.ok() && res_->comms.pp != nullptr && info.numel > 0) {
      s = res_->HostCollective(
          *res_->comms.pp, out.data(), info.numel, out.data(), info.numel, [&](const void*, void* buf) {
            return res_->comms.pp->Broadcast(buf, info.numel, DType::kF32, res_->plan.units[u].stage);
          });
    }
    // A tensor split over tp: every rank's slice in its place in the whole
    // tensor; then the padding dropped (the shape users see).
    const ParamSpec& spec = res_->model->units[u]->params()[*p];
    if (s.ok() && res_->tp_size() > 1 && !spec.partition.replicated()) {
      std::vector<float> slices(out.size() * res_->tp_size());
      s = res_->HostCollective(
          *res_->comms.tp, out.data(), info.numel, slices.data(), static_cast<int64_t>(slices.size()),
          [&](const void* in, void* all) { return res_->comms.tp->AllGather(in, all, info.numel, DType::kF32); });
      if (s.ok()) {
        out.assign(spec.numel(), 0.0f);
        for (int r = 0; r < res_->tp_size(); ++r) {
          PlaceLocalSlice(spec, r, res_->tp_size(), slices.data() + r * info.numel, out.data());
        }
      }
    }
    if (s.ok() && spec.padded()) out = DropPadding(spec, out.data());
    if (!s.ok()) {
      res_->broken = s;
      return s;
    }
    return out;
  }
  return absl::NotFoundError(absl::StrCat(
      "no parameter named '", name, "' in the model (", res_->num_units(), " units; e.g. '",
      res_->plan.layouts.empty() || res_->plan.layouts[0].params().empty() ? std::string()
                                                                           : res_->plan.layouts[0].params()[0].name,
      "')"));
}

}  // namespace zeroshard

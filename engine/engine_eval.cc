// Evaluation (the forward-only program) and GatherParam.
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/status_agreement.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "engine/engine_impl.h"
#include "nn/param_spec.h"

namespace zeroshard {

absl::StatusOr<EvalResult> EngineImpl::Evaluate(const Batch& batch) {
  RETURN_IF_ERROR(CheckUsable());
  TraceScope span(timeline_.get(), "pass", "eval pass");
  absl::Status local = batch.Validate();
  for (const NamedTensor& t : batch.tensors()) {
    if (local.ok() && t.view.device != Device::kCpu) {
      local = absl::InvalidArgumentError(absl::StrCat("batch tensor '", t.name, "' is on ", DeviceName(t.view.device),
                                                      ", expected host (cpu) memory"));
    }
  }
  std::vector<Buffer> batch_storage;
  std::vector<Batch> device_batch;
  if (local.ok()) local = StageBatches({&batch, 1}, &batch_storage, &device_batch);
  double nominal = 0;
  RETURN_IF_ERROR(AgreeOnBatches({&batch, 1}, local, &nominal));
  RunContext run;
  run.batches = BatchesToRun({&batch, 1}, device_batch);
  run.training = false;
  absl::Status s = RunProgram(plan_.eval, &run);
  // A tp group's ranks hold the same loss terms: counted once.
  absl::StatusOr<LossTerms> resolved =
      run.losses.empty() || tp_rank() != 0 ? LossTerms() : ResolveLossTerms(run.losses[0]);
  if (s.ok()) s = resolved.status();
  const LossTerms terms = resolved.ok() ? *resolved : LossTerms();
  std::vector<float> sums(2 + 2 * plan_.metric_names.size(), 0.0f);
  if (s.ok()) {
    sums[0] = static_cast<float>(terms.loss.sum);
    sums[1] = static_cast<float>(terms.loss.weight);
    for (size_t i = 0; i < plan_.metric_names.size() && i < terms.metrics.size(); ++i) {
      sums[2 + 2 * i] = static_cast<float>(terms.metrics[i].sum);
      sums[3 + 2 * i] = static_cast<float>(terms.metrics[i].weight);
    }
    const auto issued = std::chrono::steady_clock::now();
    const int64_t n = static_cast<int64_t>(sums.size());
    s = HostCollective(
        *world_, sums.data(), n, sums.data(), n,
        [&](const void*, void* buf) { return world_->AllReduce(buf, n, DType::kF32, ReduceOp::kSum); },
        [&](Work& w) {
          return WaitTraced(w, timeline_.get(), "allreduce", "AllReduce", "eval loss", issued,
                            n * static_cast<int64_t>(sizeof(float)));
        });
  }
  if (!s.ok()) {
    broken_ = s;
    return s;
  }
  EvalResult result;
  result.loss = sums[0] / sums[1];
  result.loss_weight = sums[1];
  for (size_t i = 0; i < plan_.metric_names.size(); ++i) {
    result.metrics.push_back({plan_.metric_names[i], static_cast<double>(sums[2 + 2 * i]) / sums[3 + 2 * i]});
  }
  return result;
}

CommStats EngineImpl::comm_stats() const {
  CommStats stats = dp_->Stats();
  if (replica_ != nullptr) {
    const CommStats replica = replica_->Stats();
    for (size_t op = 0; op < stats.per_op.size(); ++op) {
      stats.per_op[op].calls += replica.per_op[op].calls;
      stats.per_op[op].bytes_sent += replica.per_op[op].bytes_sent;
      stats.per_op[op].bytes_received += replica.per_op[op].bytes_received;
    }
  }
  return stats;
}

std::map<std::string, CommStats> EngineImpl::comm_stats_by_group() const {
  std::map<std::string, CommStats> out;
  if (replica_ == nullptr) {
    out["dp"] = dp_->Stats();
  } else {
    out["dp_shard"] = dp_->Stats();
    out["dp_replica"] = replica_->Stats();
  }
  if (tp_ != nullptr) out["tp"] = tp_->Stats();
  if (pp_ != nullptr) out["pp"] = pp_->Stats();
  if (embedding_ != nullptr) out["embed"] = embedding_->Stats();
  // The step's few world-wide sums (norm, overflow, loss); when dp is the
  // whole job they travel on dp and are counted there.
  if (world_ != nullptr && world_ != dp_) out["world"] = world_->Stats();
  return out;
}

absl::StatusOr<std::vector<float>> EngineImpl::GatherParam(absl::string_view name) {
  RETURN_IF_ERROR(CheckUsable());
  for (int u = 0; u < num_units(); ++u) {
    absl::StatusOr<int> p = plan_.layouts[u].FindParam(name);
    if (!p.ok()) continue;
    const FlatParamInfo& info = plan_.layouts[u].params()[*p];
    std::vector<float> out(info.numel);
    // The stage that computes the unit gathers it over its dp group (every
    // rank allocating first and agreeing, so a rank that cannot leaves none
    // waiting in the gather); the other stages receive it by broadcast.
    const bool source = plan_.units[u].computed;
    absl::StatusOr<Buffer> full = absl::StatusOr<Buffer>(Buffer());
    if (source && options_.zero.shards_master()) {
      full = Buffer::Allocate(&tracker_, MemoryCategory::kWorkspace, device(), DType::kF32,
                              plan_.layouts[u].padded_numel());
    }
    RETURN_IF_ERROR(AgreeAcrossRanks(*control_, full.status(), absl::StrCat("GatherParam('", name, "')")));
    absl::Status s;
    if (source) {
      UnitShard& shard = *shards_[u];
      if (!options_.zero.shards_master()) {
        s = DeviceCopy(out.data(), Device::kCpu, shard.master() + info.offset, device(), info.numel * sizeof(float));
      } else {
        s = dp_->AllGather(shard.master(), full->data(), plan_.layouts[u].shard_numel(), DType::kF32)->Wait();
        if (s.ok()) {
          s = DeviceCopy(out.data(), Device::kCpu, full->as<float>() + info.offset, device(),
                         info.numel * sizeof(float));
        }
      }
    }
    if (s.ok() && pp_ != nullptr && info.numel > 0) {
      s = HostCollective(*pp_, out.data(), info.numel, out.data(), info.numel, [&](const void*, void* buf) {
        return pp_->Broadcast(buf, info.numel, DType::kF32, plan_.units[u].stage);
      });
    }
    // A tensor split over tp: every rank's slice in its place in the whole
    // tensor; then the padding dropped (the shape users see).
    const ParamSpec& spec = model_->units[u]->params()[*p];
    if (s.ok() && tp_size() > 1 && !spec.partition.replicated()) {
      std::vector<float> slices(out.size() * tp_size());
      s = HostCollective(*tp_, out.data(), info.numel, slices.data(), static_cast<int64_t>(slices.size()),
                         [&](const void* in, void* all) { return tp_->AllGather(in, all, info.numel, DType::kF32); });
      if (s.ok()) {
        out.assign(spec.numel(), 0.0f);
        for (int r = 0; r < tp_size(); ++r) {
          PlaceLocalSlice(spec, r, tp_size(), slices.data() + r * info.numel, out.data());
        }
      }
    }
    if (s.ok() && spec.padded()) out = DropPadding(spec, out.data());
    if (!s.ok()) {
      broken_ = s;
      return s;
    }
    return out;
  }
  return absl::NotFoundError(absl::StrCat("no parameter named '", name, "' in the model (", num_units(),
                                          " units; e.g. '", plan_.layouts.empty() || plan_.layouts[0].params().empty()
                                                                ? std::string()
                                                                : plan_.layouts[0].params()[0].name,
                                          "')"));
}

}  // namespace zeroshard

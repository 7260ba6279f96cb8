#include "engine/step_executor.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/status_agreement.h"
#include "comm/traced_wait.h"
#include "core/hash.h"
#include "core/status_macros.h"
#include "core/stopwatch.h"

namespace zeroshard {
namespace {

using Clock = SteadyClock;

// The per-rank record of the batch agreement, in i32 words.
constexpr int kRecordWords = 9;

void PutU64(uint64_t v, int32_t* words) {
  words[0] = static_cast<int32_t>(static_cast<uint32_t>(v & 0xffffffffu));
  words[1] = static_cast<int32_t>(static_cast<uint32_t>(v >> 32));
}

uint64_t GetU64(const int32_t* words) {
  return static_cast<uint64_t>(static_cast<uint32_t>(words[0])) |
         (static_cast<uint64_t>(static_cast<uint32_t>(words[1])) << 32);
}

std::string BatchesSignature(absl::Span<const Batch> batches) {
  std::vector<std::string> parts;
  for (size_t m = 0; m < batches.size(); ++m) parts.push_back(absl::StrCat("[", m, "] ", batches[m].Signature()));
  return absl::StrJoin(parts, "; ");
}

// OK when every batch is well formed and on the host.
absl::Status CheckBatches(absl::Span<const Batch> batches) {
  for (size_t m = 0; m < batches.size(); ++m) {
    absl::Status s = batches[m].Validate();
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("micro-batch ", m, ": ", s.message()));
    for (const NamedTensor& t : batches[m].tensors()) {
      if (t.view.device != Device::kCpu) {
        return absl::InvalidArgumentError(absl::StrCat("micro-batch ", m, " tensor '", t.name, "' is on ",
                                                       DeviceName(t.view.device), ", expected host (cpu) memory"));
      }
    }
  }
  return absl::OkStatus();
}

// The StepTimings fields that add up time blocked, by WaitKind.
std::array<double, 5> Waits(const StepTimings& t) {
  return {t.gather_wait, t.reduce_wait, t.pipeline_wait_forward, t.pipeline_wait_backward, t.publish_wait};
}

}  // namespace

absl::Status StepExecutor::AgreeOnBatches(absl::Span<const Batch> batches, const absl::Status& local,
                                          double* nominal_weight) {
  const int n = res_->comms.control->size();
  const int me = res_->comms.control->rank();
  const std::string group = res_->ControlGroup();
  const std::string signature = BatchesSignature(batches);
  double nominal = 0;
  int64_t rows = 0;
  // Every stage gets the batches; the loss weight counts on the last one,
  // once per tp group (its ranks see the same batch).
  if (local.ok() && res_->plan.units.back().computed && res_->tp_rank() == 0) {
    const Unit& last = *res_->model->units.back();
    for (const Batch& b : batches) {
      nominal += last.NominalLossWeight(b);
      rows += b.rows();
    }
  }
  std::vector<int32_t> mine(kRecordWords, 0), all(static_cast<size_t>(kRecordWords) * n, 0);
  mine[0] = static_cast<int32_t>(local.code());
  PutU64(Fnv1a64(signature), &mine[1]);
  uint64_t bits = 0;
  std::memcpy(&bits, &nominal, sizeof(bits));
  PutU64(bits, &mine[3]);
  PutU64(static_cast<uint64_t>(rows), &mine[5]);
  const Clock::time_point issued = Clock::now();
  std::unique_ptr<Work> agree = res_->comms.control->AllGather(mine.data(), all.data(), kRecordWords, DType::kI32);
  absl::Status waited = WaitTraced(*agree, res_->timeline.get(), "allgather", "AllGather", "batch signatures", issued,
                                   static_cast<int64_t>(all.size()) * 4);
  if (!local.ok()) return local;
  RETURN_IF_ERROR(waited);
  for (int r = 0; r < n; ++r) {
    const int32_t code = all[static_cast<size_t>(r) * kRecordWords];
    if (code != 0) {
      return RelayedError(static_cast<absl::StatusCode>(code),
                          absl::StrCat("the step could not start on ", group, " rank ", r,
                                       " (see its error); this rank (", group, " rank ", me, ") was fine"));
    }
  }
  std::vector<int> differ;
  const uint64_t first = GetU64(&all[1]);
  for (int r = 1; r < n; ++r) {
    if (GetU64(&all[static_cast<size_t>(r) * kRecordWords + 1]) != first) differ.push_back(r);
  }
  if (!differ.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the micro-batches differ across ", group, " ranks: ", group,
                                                   " rank(s) ", absl::StrJoin(differ, ", "),
                                                   " have other names, dtypes or shapes than ", group,
                                                   " rank 0; this rank (", group, " rank ", me, ") has ", signature));
  }
  double total = 0;
  for (int r = 0; r < n; ++r) {
    double w = 0;
    const uint64_t b = GetU64(&all[static_cast<size_t>(r) * kRecordWords + 3]);
    std::memcpy(&w, &b, sizeof(w));
    total += w;
  }
  *nominal_weight = total;
  return absl::OkStatus();
}

absl::Status StepExecutor::BeginStep(RunContext* run) {
  const absl::Span<const Batch> host = run->host_batches;
  absl::Status local =
      static_cast<int>(host.size()) == res_->options.accumulation_steps
          ? CheckBatches(host)
          : absl::InvalidArgumentError(absl::StrCat(
                "got ", host.size(),
                " micro-batches, expected gradient_accumulation_steps=", res_->options.accumulation_steps));
  // The step's staging buffers are allocated before the agreement, so an
  // allocation that fails on one rank stops every rank here.
  if (local.ok()) local = state_->reducer().ReserveStaging();
  for (auto& shard : state_->shards()) {
    if (shard != nullptr && local.ok() && res_->options.zero.grad_shard_per_step()) local = shard->EnsureGradShard();
  }
  if (local.ok()) local = res_->StageBatches(host, &run->batch_storage, &run->device_batches);
  double nominal = 0;
  absl::Status agreed = AgreeOnBatches(host, local, &nominal);
  if (!agreed.ok()) {
    state_->reducer().FreeStaging();
    for (auto& shard : state_->shards()) {
      if (shard != nullptr) shard->FreeGradShard();
    }
    return agreed;
  }
  run->started = true;
  run->batches = EngineResources::BatchesToRun(host, run->device_batches);
  for (auto& shard : state_->shards()) {
    if (shard == nullptr) continue;
    if (res_->options.zero.zeroes_full_grads()) {
      RETURN_IF_ERROR(shard->ZeroFullGrads());
    } else {
      RETURN_IF_ERROR(shard->ZeroGradShard());
    }
  }
  // Gradients keep the magnitude of a mean: the seed is the loss scale over
  // the per-rank share of the nominal weight; REDUCE_NORM corrects by
  // nominal / actual weight once.
  run->loss_seed = static_cast<float>(state_->scaler().scale() * static_cast<double>(res_->dp_size()) / nominal);
  run->nominal_weight = nominal;
  for (const Batch& b : host) run->result->rows += b.rows();
  run->result->rows *= res_->dp_size();
  return absl::OkStatus();
}

absl::Status StepExecutor::RunProgram(const StepProgram& program, RunContext* run) {
  const int L = res_->num_units();
  run->losses.assign(run->batches.size(), LossTerms());
  run->state.clear();
  run->state.resize(run->batches.size());
  for (auto& per_mb : run->state) per_mb.resize(L);
  kept_now_ = 0;
  for (const Action& action : program.actions) {
    RETURN_IF_ERROR(res_->observers.empty() || !run->training
                        ? RunAction(action, run)
                        : RunObservedAction(action, static_cast<int>(&action - program.actions.data()), run));
    if (!run->transfers.empty()) RETURN_IF_ERROR(transport_->Progress(&run->transfers));
    // Offload I/O moves only when this thread reaps and submits: between
    // compute actions, so the queue stays full under forward and backward.
    if (state_->offload() != nullptr) state_->offload()->io().Progress();
    if (state_->param_store() != nullptr) state_->param_store()->io().Progress();
  }
  return transport_->Finish(&run->transfers);
}

absl::Status StepExecutor::RunObservedAction(const Action& action, int index, RunContext* run) {
  ActionEvent event;
  event.attempt = state_->attempts();  // SCALER_UPDATE counts the attempt: read it before
  event.action = &action;
  event.index = index;
  for (const IssuedCollective& c : action.issues) event.bytes += c.bytes_per_rank;
  res_->Notify([&](EngineObserver& o) { o.OnActionStart(event); });
  const StepTimings none;
  const std::array<double, 5> before = Waits(run->timings == nullptr ? none : *run->timings);
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(RunAction(action, run));
  event.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::array<double, 5> after = Waits(run->timings == nullptr ? none : *run->timings);
  for (size_t k = 0; k < after.size(); ++k) {
    const double waited = after[k] - before[k];
    if (waited <= 0) continue;
    event.wait_seconds += waited;
    const WaitEvent wait{event.attempt, &action, static_cast<WaitKind>(k), waited};
    res_->Notify([&](EngineObserver& o) { o.OnWait(wait); });
  }
  res_->Notify([&](EngineObserver& o) { o.OnActionEnd(event); });
  return absl::OkStatus();
}

UnitContext StepExecutor::ContextFor(const RunContext& run, int micro_batch, int unit) const {
  UnitContext ctx;
  ctx.compute = res_->compute;
  ctx.training = run.training;
  ctx.rng_key = UnitRngKey(res_->options.seed, run.training ? state_->attempts() : -1, micro_batch, unit);
  ctx.micro_batch = micro_batch;
  ctx.input_grad = res_->plan.units[unit].input_grad;
  ctx.selective_checkpoint = run.training && res_->plan.units[unit].selective;
  ctx.parallel.tp = res_->comms.tp;
  ctx.parallel.tp_rank = res_->tp_rank();
  ctx.parallel.tp_size = res_->tp_size();
  ctx.parallel.sequence_parallel = res_->options.tensor.sequence_parallel;
  ctx.parallel.keep_gathered_ln_outputs = res_->options.tensor.keep_gathered_ln_outputs;
  ctx.parallel.timeline = res_->timeline.get();
  return ctx;
}

void StepExecutor::CountLive() {
  if (!res_->options.zero.gathers_params()) return;
  int live = 0;
  for (const auto& shard : state_->shards()) {
    if (shard != nullptr) live += (shard->gathered() || shard->gather_in_flight()) ? 1 : 0;
  }
  peak_gathered_ = std::max(peak_gathered_, live);
}

absl::Status StepExecutor::ParamViews(int unit, std::vector<TensorView>* params, std::vector<TensorView>* grads) {
  if (params != nullptr) params->clear();
  if (grads != nullptr) grads->clear();
  const DType dt = res_->options.compute_dtype;
  const int64_t size = static_cast<int64_t>(DTypeSize(dt));
  auto view = [&](void* base, int64_t offset, const std::vector<int64_t>& shape) {
    TensorView v;
    v.data = base == nullptr ? nullptr : static_cast<char*>(base) + offset * size;
    v.dtype = dt;
    v.shape = shape;
    v.device = res_->device();
    return v;
  };
  // Owned parameters, then borrowed ones: (owner shard, offset, shape).
  std::vector<std::tuple<int, int64_t, std::vector<int64_t>>> sources;
  for (const FlatParamInfo& p : res_->plan.layouts[unit].params()) sources.emplace_back(unit, p.offset, p.shape);
  for (const UnitPlan::Borrowed& b : res_->plan.units[unit].borrowed) sources.emplace_back(b.owner, b.offset, b.shape);
  for (const auto& [owner, offset, shape] : sources) {
    UnitShard* shard = state_->unit_shard(owner);
    if (shard == nullptr || (params != nullptr && shard->full_params() == nullptr)) {
      return absl::InternalError(absl::StrCat("unit '", res_->plan.layouts[unit].unit_name(),
                                              "' runs without the "
                                              "parameters of unit '",
                                              res_->plan.layouts[owner].unit_name(),
                                              "' gathered (the step program must WAIT_GATHER it first)"));
    }
    if (params != nullptr) params->push_back(view(shard->full_params(), offset, shape));
    if (grads != nullptr) grads->push_back(view(shard->full_grads(), offset, shape));
  }
  return absl::OkStatus();
}

// A parameter shard's I/O (engine/param_shard_store.h): after WAIT_LOAD
// the unit's shard is the slot's, for the GATHER or the rounding that
// follows.
absl::Status StepExecutor::RunParamShardIo(const Action& a) {
  ParamShardStore* store = state_->param_store();
  if (store == nullptr || a.param_slot >= store->slots() || !store->streams(a.unit)) {
    return absl::InternalError(absl::StrCat(ActionKindName(a.kind), " unit=", a.unit, " param_slot=", a.param_slot,
                                            " in a program of an engine whose parameters do not stream there"));
  }
  switch (a.kind) {
    case ActionKind::kLoad:
      store->Load(a.unit, a.param_slot);
      break;
    case ActionKind::kWaitLoad:
      store->WaitLoad(a.param_slot);
      state_->unit_shard(a.unit)->BindParamShard(store->slot(a.param_slot));
      break;
    case ActionKind::kStore:
      store->Store(a.unit, a.param_slot);
      break;
    default:
      store->WaitStore(a.param_slot);
      break;
  }
  return absl::OkStatus();
}

absl::Status StepExecutor::RunAction(const Action& a, RunContext* run) {
  const Clock::time_point t0 = Clock::now();
  StepTimings* t = run->timings;
  auto charge = [&](double* extra) {
    const double dt = SecondsSince(t0);
    if (t == nullptr) return;
    (run->in_backward ? t->backward : t->forward) += dt;
    if (extra != nullptr) *extra += dt;
  };
  const int L = res_->num_units();
  switch (a.kind) {
    case ActionKind::kGather:
      RETURN_IF_ERROR(state_->unit_shard(a.unit)->StartGather());
      CountLive();
      charge(nullptr);
      return absl::OkStatus();
    case ActionKind::kWaitGather:
      RETURN_IF_ERROR(state_->unit_shard(a.unit)->WaitGather());
      CountLive();
      charge(t == nullptr ? nullptr : &t->gather_wait);
      return absl::OkStatus();
    case ActionKind::kRelease:
      RETURN_IF_ERROR(state_->unit_shard(a.unit)->Release());
      charge(nullptr);
      return absl::OkStatus();
    case ActionKind::kForward:
    case ActionKind::kRecompute: {
      const bool recompute = a.kind == ActionKind::kRecompute;
      if (!recompute) run->in_backward = false;
      const int u = a.unit, m = a.micro_batch;
      UnitState& st = run->state[m][u];
      std::vector<TensorView> params;
      RETURN_IF_ERROR(ParamViews(u, &params, nullptr));
      // Activations arrive as the input of `u`: where the unit below would
      // have left its output.
      if (u > 0 && !recompute) {
        RETURN_IF_ERROR(
            transport_->CompleteReceive(kTransferActivations, m, u, &run->transfers, &run->state[m][u - 1].output,
                                        run->timings == nullptr ? nullptr : &run->timings->pipeline_wait_forward));
      }
      std::vector<TensorView> in;
      if (u > 0) in = recompute ? st.kept_input.views() : run->state[m][u - 1].output.views();
      UnitOutput out;
      {
        TraceScope span(res_->timeline.get(), recompute ? "recompute" : "forward", recompute ? "recompute" : "forward",
                        res_->model->units[u]->name(), {{"unit", u}, {"micro_batch", m}});
        RETURN_IF_ERROR(
            res_->model->units[u]->Forward(ContextFor(*run, m, u), params, run->batches[m], in, &out, &st.saved));
      }
      if (recompute) {
        // The same kernels on the same input rebuild the same activations.
        st.kept_input.Clear();
        charge(nullptr);
        return absl::OkStatus();
      }
      if (u == L - 1) {
        if (out.loss.metrics.size() != res_->plan.metric_names.size()) {
          return absl::InternalError(absl::StrCat("the last unit '", res_->model->units[u]->name(), "' returned ",
                                                  out.loss.metrics.size(), " metrics, it declares ",
                                                  res_->plan.metric_names.size()));
        }
        run->losses[m] = out.loss;
      } else {
        st.output = std::move(out.activations);
      }
      if (run->training && res_->plan.units[u].backward) {
        if (res_->plan.units[u].checkpointed) {
          // Keep only the input; RECOMPUTE rebuilds the rest from it.
          st.saved.reset();
          if (u > 0) st.kept_input = std::move(run->state[m][u - 1].output);
        }
        st.awaiting_backward = true;
        peak_kept_ = std::max(peak_kept_, ++kept_now_);
      } else {
        st.saved.reset();
      }
      if (u > 0) run->state[m][u - 1].output.Clear();  // Backward never reads it
      res_->TraceMemory();
      charge(nullptr);
      return absl::OkStatus();
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput: {
      run->in_backward = true;
      const int u = a.unit, m = a.micro_batch;
      UnitState& st = run->state[m][u];
      if (st.saved == nullptr) {
        return absl::InternalError(absl::StrCat(ActionKindName(a.kind), " of unit '", res_->model->units[u]->name(),
                                                "' micro-batch ", m,
                                                " has no saved activations (no FORWARD or RECOMPUTE before it)"));
      }
      RETURN_IF_ERROR(
          transport_->CompleteReceive(kTransferGradients, m, u, &run->transfers, &st.output_grad,
                                      run->timings == nullptr ? nullptr : &run->timings->pipeline_wait_backward));
      const Unit& unit = *res_->model->units[u];
      const bool split = a.kind == ActionKind::kBackwardInput && unit.SupportsSplitBackward();
      if (!split) {
        for (int o : res_->plan.units[u].needs) RETURN_IF_ERROR(state_->unit_shard(o)->EnsureFullGrads());
      }
      std::vector<TensorView> params, grads;
      RETURN_IF_ERROR(ParamViews(u, &params, split ? nullptr : &grads));
      float seed = run->loss_seed;
      std::vector<TensorView> grad_out;
      if (u == L - 1) {
        TensorView s;
        s.data = &seed;
        s.dtype = DType::kF32;
        s.shape = {1};
        grad_out.push_back(s);
      } else {
        grad_out = st.output_grad.views();
      }
      ActivationPack grad_in;
      {
        TraceScope span(res_->timeline.get(), "backward", "backward", unit.name(), {{"unit", u}, {"micro_batch", m}});
        if (split) {
          RETURN_IF_ERROR(unit.BackwardInput(ContextFor(*run, m, u), params, run->batches[m], *st.saved, grad_out,
                                             &grad_in, &st.weight_inputs));
        } else {
          RETURN_IF_ERROR(
              unit.Backward(ContextFor(*run, m, u), params, grads, run->batches[m], *st.saved, grad_out, &grad_in));
        }
      }
      st.output_grad.Clear();
      if (!split) {
        // The whole backward ran (a BACKWARD_WEIGHT that follows has nothing left).
        st.saved.reset();
        st.awaiting_backward = false;
        --kept_now_;
      }
      if (u > 0) run->state[m][u - 1].output_grad = std::move(grad_in);
      res_->TraceMemory();
      charge(nullptr);
      return absl::OkStatus();
    }
    case ActionKind::kBackwardWeight: {
      const int u = a.unit, m = a.micro_batch;
      UnitState& st = run->state[m][u];
      if (st.saved == nullptr) return absl::OkStatus();  // the unit ran its whole backward at BACKWARD_INPUT
      if (st.weight_inputs == nullptr) {
        return absl::InternalError(absl::StrCat("BACKWARD_WEIGHT of unit '", res_->model->units[u]->name(),
                                                "' micro-batch ", m, " before its BACKWARD_INPUT"));
      }
      for (int o : res_->plan.units[u].needs) RETURN_IF_ERROR(state_->unit_shard(o)->EnsureFullGrads());
      std::vector<TensorView> grads;
      RETURN_IF_ERROR(ParamViews(u, nullptr, &grads));
      {
        TraceScope span(res_->timeline.get(), "backward", "backward weight", res_->model->units[u]->name(),
                        {{"unit", u}, {"micro_batch", m}});
        RETURN_IF_ERROR(res_->model->units[u]->BackwardWeight(ContextFor(*run, m, u), grads, run->batches[m], *st.saved,
                                                              *st.weight_inputs));
      }
      st.saved.reset();
      st.weight_inputs.reset();
      st.awaiting_backward = false;
      --kept_now_;
      res_->TraceMemory();
      charge(nullptr);
      return absl::OkStatus();
    }
    case ActionKind::kReduce:
      RETURN_IF_ERROR(state_->reducer().Launch(a.bucket));
      charge(nullptr);
      return absl::OkStatus();
    case ActionKind::kWaitReduce: {
      // Hybrid sharding: this Finish first completes the replica all-reduce
      // of `landing`, then leaves this bucket's in flight unless it is the
      // pass's last reduction.
      const int landing = state_->reducer().replica_pending();
      RETURN_IF_ERROR(optimizer_->StageReducedGrads(a.bucket));
      RETURN_IF_ERROR(state_->reducer().Finish(a.bucket));
      // A bucket's reduced shards leave once its reduction has landed in
      // them (under hybrid sharding: its replica all-reduce too): copied to
      // the host (host offload), written to the grads file (grads on NVMe).
      for (const int landed : {landing, a.bucket}) {
        if (landed < 0 || state_->reducer().replica_pending() == landed) continue;
        RETURN_IF_ERROR(state_->FetchReducedGrads(landed));
        RETURN_IF_ERROR(optimizer_->StoreReducedGrads(landed));
      }
      charge(t == nullptr ? nullptr : &t->reduce_wait);
      return absl::OkStatus();
    }
    case ActionKind::kBeginStep:
      return BeginStep(run);
    case ActionKind::kTiedReduce:
    case ActionKind::kNormPartial:
    case ActionKind::kReduceNorm:
    case ActionKind::kUpdate:
    case ActionKind::kPublish:
    case ActionKind::kTiedPublish:
    case ActionKind::kScalerUpdate:
      RETURN_IF_ERROR(optimizer_->Run(a, run->losses, run->nominal_weight, run->result, &run->optimizer));
      if (t != nullptr) t->optimizer += SecondsSince(t0);
      return absl::OkStatus();
    case ActionKind::kLoad:
    case ActionKind::kWaitLoad:
    case ActionKind::kStore:
    case ActionKind::kWaitStore: {
      // The NVMe tier's I/O never fails the action: an error is kept and
      // agreed on at SCALER_UPDATE (engine/offload_store.h).
      if (a.param_slot >= 0) {
        RETURN_IF_ERROR(RunParamShardIo(a));
      } else {
        OffloadStore* store = state_->offload();
        if (store == nullptr) {
          return absl::InternalError(
              absl::StrCat(ActionKindName(a.kind), " in a program of an engine without the NVMe tier"));
        }
        if (a.kind == ActionKind::kLoad) store->Load(a.chunk);
        if (a.kind == ActionKind::kWaitLoad) store->WaitLoad(a.chunk);
        if (a.kind == ActionKind::kStore) store->Store(a.chunk);
        if (a.kind == ActionKind::kWaitStore) store->WaitStore(a.chunk);
      }
      if (t != nullptr && run->optimizer.started) {
        t->optimizer += SecondsSince(t0);
      } else {
        charge(nullptr);
      }
      return absl::OkStatus();
    }
    case ActionKind::kSendAct:
    case ActionKind::kSendGrad:
      // Activations: the unit's output, which no unit of this stage reads.
      // Gradients: the unit's input gradient, written where the unit below
      // would read it.
      RETURN_IF_ERROR(transport_->PostSend(a,
                                           a.kind == ActionKind::kSendAct
                                               ? &run->state[a.micro_batch][a.unit].output
                                               : &run->state[a.micro_batch][a.unit - 1].output_grad,
                                           &run->transfers));
      charge(nullptr);
      return absl::OkStatus();
    case ActionKind::kRecvAct:
    case ActionKind::kRecvGrad:
      RETURN_IF_ERROR(transport_->PostReceive(a, &run->transfers));
      charge(nullptr);
      return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("the executor does not run ", ActionKindName(a.kind), " actions"));
}

}  // namespace zeroshard

// The step executor: the batch agreement that starts a step, then the step
// program's actions one after another (engine/step_program.h).
#include <algorithm>
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
#include "engine/engine_impl.h"

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

}  // namespace

absl::Status EngineImpl::AgreeOnBatches(absl::Span<const Batch> batches, const absl::Status& local,
                                        double* nominal_weight) {
  const int n = control_->size();
  const int me = control_->rank();
  const std::string group = ControlGroup();
  const std::string signature = BatchesSignature(batches);
  double nominal = 0;
  int64_t rows = 0;
  // Every stage gets the batches; the loss weight counts on the last one,
  // once per tp group (its ranks see the same batch).
  if (local.ok() && plan_.units.back().computed && tp_rank() == 0) {
    const Unit& last = *model_->units.back();
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
  std::unique_ptr<Work> agree = control_->AllGather(mine.data(), all.data(), kRecordWords, DType::kI32);
  absl::Status waited = WaitTraced(*agree, timeline_.get(), "allgather", "AllGather", "batch signatures", issued,
                                   static_cast<int64_t>(all.size()) * 4);
  if (!local.ok()) return local;
  RETURN_IF_ERROR(waited);
  for (int r = 0; r < n; ++r) {
    const int32_t code = all[static_cast<size_t>(r) * kRecordWords];
    if (code != 0) {
      return RelayedError(static_cast<absl::StatusCode>(code),
                          absl::StrCat("the step could not start on ", group, " rank ", r, " (see its error); this rank (",
                                       group, " rank ", me, ") was fine"));
    }
  }
  std::vector<int> differ;
  const uint64_t first = GetU64(&all[1]);
  for (int r = 1; r < n; ++r) {
    if (GetU64(&all[static_cast<size_t>(r) * kRecordWords + 1]) != first) differ.push_back(r);
  }
  if (!differ.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the micro-batches differ across ", group, " ranks: ", group, " rank(s) ", absl::StrJoin(differ, ", "),
        " have other names, dtypes or shapes than ", group, " rank 0; this rank (", group, " rank ", me, ") has ",
        signature));
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

absl::StatusOr<StepResult> EngineImpl::RunTrainStep(absl::Span<const Batch> micro_batches) {
  RETURN_IF_ERROR(CheckUsable());
  Clock::time_point start = Clock::now();
  StepResult result;
  // Closes (and is recorded) before the window may close below.
  std::optional<TraceScope> step_span;
  if (timeline_ != nullptr && timeline_->recording()) {
    // Named after the optimizer step it makes (a skipped attempt repeats it).
    step_span.emplace(timeline_.get(), "step", "step", absl::StrCat(step_ + 1),
                      std::initializer_list<TraceArg>{{"step", step_ + 1}});
  }
  RunContext run;
  run.host_batches = micro_batches;
  run.batches = micro_batches;
  run.training = true;
  run.result = &result;
  run.timings = &result.timings;
  absl::Status s = RunProgram(plan_.train, &run);
  if (!s.ok()) {
    // Before BEGIN_STEP's agreement nothing ran on any rank.
    if (run.started) broken_ = s;
    return s;
  }
  step_span.reset();
  if (timeline_ != nullptr && timeline_->recording()) {
    ++traced_steps_;
    if (trace_steps_ > 0 && traced_steps_ >= trace_steps_) timeline_->set_recording(false);
  }
  result.timings.total = SecondsSince(start);
  return result;
}

absl::Status EngineImpl::BeginStep(RunContext* run) {
  const absl::Span<const Batch> host = run->host_batches;
  absl::Status local =
      static_cast<int>(host.size()) == options_.accumulation_steps
          ? CheckBatches(host)
          : absl::InvalidArgumentError(absl::StrCat("got ", host.size(),
                                                    " micro-batches, expected gradient_accumulation_steps=",
                                                    options_.accumulation_steps));
  // The step's staging buffers are allocated before the agreement, so an
  // allocation that fails on one rank stops every rank here.
  if (local.ok()) local = reducer_->ReserveStaging();
  for (auto& shard : shards_) {
    if (shard != nullptr && local.ok() && options_.zero.grad_shard_per_step()) local = shard->EnsureGradShard();
  }
  if (local.ok()) local = StageBatches(host, &run->batch_storage, &run->device_batches);
  double nominal = 0;
  absl::Status agreed = AgreeOnBatches(host, local, &nominal);
  if (!agreed.ok()) {
    reducer_->FreeStaging();
    for (auto& shard : shards_) {
      if (shard != nullptr) shard->FreeGradShard();
    }
    return agreed;
  }
  run->started = true;
  run->batches = BatchesToRun(host, run->device_batches);
  for (auto& shard : shards_) {
    if (shard == nullptr) continue;
    if (options_.zero.zeroes_full_grads()) {
      RETURN_IF_ERROR(shard->ZeroFullGrads());
    } else {
      RETURN_IF_ERROR(shard->ZeroGradShard());
    }
  }
  // Gradients keep the magnitude of a mean: the seed is the loss scale over
  // the per-rank share of the nominal weight; REDUCE_NORM corrects by
  // nominal / actual weight once.
  run->loss_seed = static_cast<float>(scaler_->scale() * static_cast<double>(dp_size()) / nominal);
  run->nominal_weight = nominal;
  for (const Batch& b : host) run->result->rows += b.rows();
  run->result->rows *= dp_size();
  return absl::OkStatus();
}

absl::Status EngineImpl::RunProgram(const StepProgram& program, RunContext* run) {
  const int L = num_units();
  run->losses.assign(run->batches.size(), LossTerms());
  run->state.clear();
  run->state.resize(run->batches.size());
  for (auto& per_mb : run->state) per_mb.resize(L);
  kept_now_ = 0;
  for (const Action& action : program.actions) {
    RETURN_IF_ERROR(observers_.empty() || !run->training
                        ? RunAction(action, run)
                        : RunObservedAction(action, static_cast<int>(&action - program.actions.data()), run));
    if (!run->receives.empty() || !run->sends.empty()) RETURN_IF_ERROR(ProgressTransfers(run));
  }
  return FinishTransfers(run);
}

UnitContext EngineImpl::ContextFor(const RunContext& run, int micro_batch, int unit) const {
  UnitContext ctx;
  ctx.compute = compute_;
  ctx.training = run.training;
  ctx.rng_key = UnitRngKey(options_.seed, run.training ? attempts_ : -1, micro_batch, unit);
  ctx.micro_batch = micro_batch;
  ctx.input_grad = plan_.units[unit].input_grad;
  ctx.parallel.tp = tp_;
  ctx.parallel.tp_rank = tp_rank();
  ctx.parallel.tp_size = tp_size();
  ctx.parallel.sequence_parallel = options_.tensor.sequence_parallel;
  ctx.parallel.timeline = timeline_.get();
  return ctx;
}

void EngineImpl::CountLive() {
  if (!options_.zero.gathers_params()) return;
  int live = 0;
  for (const auto& shard : shards_) {
    if (shard != nullptr) live += (shard->gathered() || shard->gather_in_flight()) ? 1 : 0;
  }
  peak_gathered_ = std::max(peak_gathered_, live);
}

absl::Status EngineImpl::ParamViews(int unit, std::vector<TensorView>* params, std::vector<TensorView>* grads) {
  if (params != nullptr) params->clear();
  if (grads != nullptr) grads->clear();
  const DType dt = options_.compute_dtype;
  const int64_t size = static_cast<int64_t>(DTypeSize(dt));
  auto view = [&](void* base, int64_t offset, const std::vector<int64_t>& shape) {
    TensorView v;
    v.data = base == nullptr ? nullptr : static_cast<char*>(base) + offset * size;
    v.dtype = dt;
    v.shape = shape;
    v.device = device();
    return v;
  };
  // Owned parameters, then borrowed ones: (owner shard, offset, shape).
  std::vector<std::tuple<int, int64_t, std::vector<int64_t>>> sources;
  for (const FlatParamInfo& p : plan_.layouts[unit].params()) sources.emplace_back(unit, p.offset, p.shape);
  for (const UnitPlan::Borrowed& b : plan_.units[unit].borrowed) sources.emplace_back(b.owner, b.offset, b.shape);
  for (const auto& [owner, offset, shape] : sources) {
    UnitShard* shard = shards_[owner].get();
    if (shard == nullptr || (params != nullptr && shard->full_params() == nullptr)) {
      return absl::InternalError(absl::StrCat("unit '", plan_.layouts[unit].unit_name(), "' runs without the "
                                              "parameters of unit '", plan_.layouts[owner].unit_name(),
                                              "' gathered (the step program must WAIT_GATHER it first)"));
    }
    if (params != nullptr) params->push_back(view(shard->full_params(), offset, shape));
    if (grads != nullptr) grads->push_back(view(shard->full_grads(), offset, shape));
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::RunAction(const Action& a, RunContext* run) {
  const Clock::time_point t0 = Clock::now();
  StepTimings* t = run->timings;
  auto charge = [&](double* extra) {
    const double dt = SecondsSince(t0);
    if (t == nullptr) return;
    (run->in_backward ? t->backward : t->forward) += dt;
    if (extra != nullptr) *extra += dt;
  };
  const int L = num_units();
  switch (a.kind) {
    case ActionKind::kGather:
      RETURN_IF_ERROR(shards_[a.unit]->StartGather());
      CountLive();
      charge(nullptr);
      return absl::OkStatus();
    case ActionKind::kWaitGather:
      RETURN_IF_ERROR(shards_[a.unit]->WaitGather());
      CountLive();
      charge(t == nullptr ? nullptr : &t->gather_wait);
      return absl::OkStatus();
    case ActionKind::kRelease:
      RETURN_IF_ERROR(shards_[a.unit]->Release());
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
      if (u > 0 && !recompute) RETURN_IF_ERROR(CompleteReceive(/*kind=*/0, m, u, run));
      std::vector<TensorView> in;
      if (u > 0) in = recompute ? st.kept_input.views() : run->state[m][u - 1].output.views();
      UnitOutput out;
      {
        TraceScope span(timeline_.get(), recompute ? "recompute" : "forward", recompute ? "recompute" : "forward",
                        model_->units[u]->name(), {{"unit", u}, {"micro_batch", m}});
        RETURN_IF_ERROR(
            model_->units[u]->Forward(ContextFor(*run, m, u), params, run->batches[m], in, &out, &st.saved));
      }
      if (recompute) {
        // The same kernels on the same input rebuild the same activations.
        st.kept_input.Clear();
        charge(nullptr);
        return absl::OkStatus();
      }
      if (u == L - 1) {
        if (out.loss.metrics.size() != plan_.metric_names.size()) {
          return absl::InternalError(absl::StrCat("the last unit '", model_->units[u]->name(), "' returned ",
                                                  out.loss.metrics.size(), " metrics, it declares ",
                                                  plan_.metric_names.size()));
        }
        run->losses[m] = out.loss;
      } else {
        st.output = std::move(out.activations);
      }
      if (run->training && plan_.units[u].backward) {
        if (plan_.units[u].checkpointed) {
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
      TraceMemory();
      charge(nullptr);
      return absl::OkStatus();
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput: {
      run->in_backward = true;
      const int u = a.unit, m = a.micro_batch;
      UnitState& st = run->state[m][u];
      if (st.saved == nullptr) {
        return absl::InternalError(absl::StrCat(ActionKindName(a.kind), " of unit '", model_->units[u]->name(),
                                                "' micro-batch ", m,
                                                " has no saved activations (no FORWARD or RECOMPUTE before it)"));
      }
      RETURN_IF_ERROR(CompleteReceive(/*kind=*/1, m, u, run));
      const Unit& unit = *model_->units[u];
      const bool split = a.kind == ActionKind::kBackwardInput && unit.SupportsSplitBackward();
      if (!split) {
        for (int o : plan_.units[u].needs) RETURN_IF_ERROR(shards_[o]->EnsureFullGrads());
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
        TraceScope span(timeline_.get(), "backward", "backward", unit.name(), {{"unit", u}, {"micro_batch", m}});
        if (split) {
          RETURN_IF_ERROR(unit.BackwardInput(ContextFor(*run, m, u), params, run->batches[m], *st.saved, grad_out,
                                             &grad_in, &st.weight_inputs));
        } else {
          RETURN_IF_ERROR(unit.Backward(ContextFor(*run, m, u), params, grads, run->batches[m], *st.saved, grad_out,
                                        &grad_in));
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
      TraceMemory();
      charge(nullptr);
      return absl::OkStatus();
    }
    case ActionKind::kBackwardWeight: {
      const int u = a.unit, m = a.micro_batch;
      UnitState& st = run->state[m][u];
      if (st.saved == nullptr) return absl::OkStatus();  // the unit ran its whole backward at BACKWARD_INPUT
      if (st.weight_inputs == nullptr) {
        return absl::InternalError(absl::StrCat("BACKWARD_WEIGHT of unit '", model_->units[u]->name(),
                                                "' micro-batch ", m, " before its BACKWARD_INPUT"));
      }
      for (int o : plan_.units[u].needs) RETURN_IF_ERROR(shards_[o]->EnsureFullGrads());
      std::vector<TensorView> grads;
      RETURN_IF_ERROR(ParamViews(u, nullptr, &grads));
      {
        TraceScope span(timeline_.get(), "backward", "backward weight", model_->units[u]->name(),
                        {{"unit", u}, {"micro_batch", m}});
        RETURN_IF_ERROR(model_->units[u]->BackwardWeight(ContextFor(*run, m, u), grads, run->batches[m], *st.saved,
                                                         *st.weight_inputs));
      }
      st.saved.reset();
      st.weight_inputs.reset();
      st.awaiting_backward = false;
      --kept_now_;
      TraceMemory();
      charge(nullptr);
      return absl::OkStatus();
    }
    case ActionKind::kReduce:
      RETURN_IF_ERROR(reducer_->Launch(a.bucket));
      charge(nullptr);
      return absl::OkStatus();
    case ActionKind::kWaitReduce:
      RETURN_IF_ERROR(reducer_->Finish(a.bucket));
      charge(t == nullptr ? nullptr : &t->reduce_wait);
      return absl::OkStatus();
    case ActionKind::kBeginStep:
      return BeginStep(run);
    case ActionKind::kTiedReduce:
    case ActionKind::kNormPartial:
    case ActionKind::kReduceNorm:
    case ActionKind::kUpdate:
    case ActionKind::kPublish:
    case ActionKind::kScalerUpdate:
      RETURN_IF_ERROR(RunOptimizerAction(a, run));
      if (t != nullptr) t->optimizer += SecondsSince(t0);
      return absl::OkStatus();
    case ActionKind::kSendAct:
    case ActionKind::kSendGrad:
      RETURN_IF_ERROR(PostSend(a, run));
      charge(nullptr);
      return absl::OkStatus();
    case ActionKind::kRecvAct:
    case ActionKind::kRecvGrad:
      RETURN_IF_ERROR(PostReceive(a, run));
      charge(nullptr);
      return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("the executor does not run ", ActionKindName(a.kind), " actions"));
}

}  // namespace zeroshard

#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "kernels/cast.h"
#include "nn/param_init.h"
#include "sharding/grad_clip.h"

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// FNV-1a, 64 bit: stable across processes (absl::Hash is salted per process).
uint64_t Fnv1a(absl::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

TensorView View(void* data, DType dtype, std::vector<int64_t> shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.device = Device::kCpu;
  return v;
}

// (B, T, numel / (B*T)) view of a unit's activation output.
TensorView ActivationView(Buffer& buf, int64_t b, int64_t t) {
  return View(buf.data(), buf.dtype(), {b, t, buf.numel() / std::max<int64_t>(1, b * t)});
}

// data + offset elements of dtype.
void* At(void* data, DType dtype, int64_t offset) {
  return static_cast<char*>(data) + offset * static_cast<int64_t>(DTypeSize(dtype));
}

}  // namespace

Engine::~Engine() {
  if (gatherer_ != nullptr) gatherer_->ReleaseAll().IgnoreError();
  if (reducer_ != nullptr) reducer_->FinishAll().IgnoreError();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config, ProcessGrid* grid,
                                                       std::unique_ptr<Model> model) {
  if (grid->shape().tp != 1 || grid->shape().pp != 1) {
    return absl::UnimplementedError(absl::StrCat("process grid tp=", grid->shape().tp, " pp=", grid->shape().pp,
                                                 ": the sharding engine supports tp=1 and pp=1 only yet"));
  }
  return CreateWithCommunicator(config, &grid->dp(), std::move(model));
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::CreateWithCommunicator(const EngineConfig& config,
                                                                       Communicator* dp,
                                                                       std::unique_ptr<Model> model) {
  if (model == nullptr) return absl::InvalidArgumentError("Engine::Create got no model");
  std::unique_ptr<Engine> engine(new Engine());
  engine->dp_ = dp;
  engine->model_ = std::move(model);
  RETURN_IF_ERROR(engine->Init(config));
  return engine;
}

absl::Status Engine::Init(const EngineConfig& config) {
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
  if (options.ok() && config.parallel().dp() != dp_->size()) {
    options = absl::InvalidArgumentError(absl::StrCat("engine.parallel.dp: ", config.parallel().dp(),
                                                      " but the dp communicator has ", dp_->size(), " ranks"));
  }
  absl::Status model_ok = model_->Validate();
  if (options.ok()) options_ = *options;

  const int n = dp_->size();
  if (model_ok.ok()) {
    for (int u = 0; u < static_cast<int>(model_->units.size()); ++u) {
      const Unit& unit = *model_->units[u];
      std::vector<FlatParamDecl> decls;
      for (const ParamSpec& p : unit.params()) decls.push_back({p.name, p.shape});
      absl::StatusOr<FlatParamLayout> layout = FlatParamLayout::Create(unit.name(), u, std::move(decls), n);
      if (!layout.ok()) {
        model_ok = layout.status();
        break;
      }
      layouts_.push_back(std::move(*layout));
    }
  }
  if (model_ok.ok()) {
    borrowed_.resize(layouts_.size());
    for (int u = 0; u < static_cast<int>(layouts_.size()); ++u) {
      for (const std::string& name : model_->units[u]->borrowed_params()) {
        absl::StatusOr<ParamLocation> loc = model_->FindParam(name);
        if (!loc.ok()) {
          model_ok = loc.status();
          break;
        }
        const FlatParamInfo& info = layouts_[loc->unit].params()[loc->param];
        borrowed_[u].push_back(Borrowed{loc->unit, info.offset, info.shape});
      }
    }
  }
  absl::Status trace_ok = InitTrace(config.logging());
  // Every rank takes part in the fingerprint exchange even when its own
  // checks failed, so that no rank is left waiting in a collective.
  absl::Status local = !options.ok() ? options.status() : !model_ok.ok() ? model_ok : trace_ok;
  RETURN_IF_ERROR(CheckFingerprints(config, local));

  compute_.kernels = kernels::KernelContext::Cpu(options_.threads_per_rank);
  compute_.compute_dtype = options_.compute_dtype;
  compute_.tracker = &tracker_;

  const int L = static_cast<int>(layouts_.size());
  std::vector<UnitShard*> raw;
  std::vector<std::vector<int>> needs(L);
  std::vector<OptimizerRegion> regions;
  for (int u = 0; u < L; ++u) {
    ASSIGN_OR_RETURN(std::unique_ptr<UnitShard> shard,
                     UnitShard::Create(&layouts_[u], options_.stage, dp_, &tracker_, options_.compute_dtype));
    shard->set_timeline(timeline_.get());
    raw.push_back(shard.get());
    regions.push_back(OptimizerRegion{&layouts_[u], shard->master_begin(), shard->master_numel()});
    shards_.push_back(std::move(shard));
    needs[u].push_back(u);
    for (const Borrowed& b : borrowed_[u]) {
      if (std::find(needs[u].begin(), needs[u].end(), b.owner) == needs[u].end()) needs[u].push_back(b.owner);
    }
  }
  ASSIGN_OR_RETURN(gatherer_, ParamGatherer::Create(raw, std::move(needs), options_.gather));
  ASSIGN_OR_RETURN(reducer_,
                   GradReducer::Create(raw, options_.bucket_bytes, dp_, &tracker_, options_.reduce_dtype));
  reducer_->set_timeline(timeline_.get());
  ASSIGN_OR_RETURN(LossScaler scaler, LossScaler::Create(options_.loss_scale));
  scaler_ = std::make_unique<LossScaler>(scaler);
  RETURN_IF_ERROR(ResolveCheckpointedUnits());
  ASSIGN_OR_RETURN(optimizer_, ShardedOptimizer::Create(options_.optimizer, std::move(regions), &tracker_,
                                                        compute_.kernels));
  ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(options_.lr_schedule));
  schedule_ = std::make_unique<LrSchedule>(schedule);
  return InitParams();
}

absl::Status Engine::CheckFingerprints(const EngineConfig& config, const absl::Status& local) {
  std::string model_text;
  if (local.ok()) {
    for (int u = 0; u < static_cast<int>(layouts_.size()); ++u) {
      absl::StrAppend(&model_text, layouts_[u].DebugString(), " borrows {");
      for (const std::string& b : model_->units[u]->borrowed_params()) absl::StrAppend(&model_text, " ", b);
      absl::StrAppend(&model_text, " }\n");
    }
  }
  EngineConfig hashed = config;
  // Per-rank paths may differ; whether and how long a trace records may not
  // (WriteTrace is collective, after the window's last step).
  hashed.clear_logging();
  if (!config.logging().trace_path().empty()) hashed.mutable_logging()->set_trace_steps(config.logging().trace_steps());
  const uint64_t model_fp = Fnv1a(model_text);
  const uint64_t config_fp = Fnv1a(hashed.SerializeAsString());
  // kMax of each 16-bit piece and of its negation gives max and -min: equal
  // pieces everywhere iff max == min.
  std::vector<int32_t> v(17, 0);
  v[0] = local.ok() ? 0 : 1;
  for (int i = 0; i < 4; ++i) {
    v[1 + i] = static_cast<int32_t>((model_fp >> (16 * i)) & 0xffff);
    v[5 + i] = static_cast<int32_t>((config_fp >> (16 * i)) & 0xffff);
    v[9 + i] = -v[1 + i];
    v[13 + i] = -v[5 + i];
  }
  RETURN_IF_ERROR(dp_->AllReduce(v.data(), static_cast<int64_t>(v.size()), DType::kI32, ReduceOp::kMax)->Wait());
  if (!local.ok()) return local;
  if (v[0] != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Engine::Create failed on another of the ", dp_->size(), " dp ranks (see its error); this rank (dp rank ",
        dp_->rank(), ") was fine"));
  }
  bool model_same = true, config_same = true;
  for (int i = 0; i < 4; ++i) {
    model_same &= v[1 + i] == -v[9 + i];
    config_same &= v[5 + i] == -v[13 + i];
  }
  if (!model_same) {
    int64_t numel = 0;
    for (const FlatParamLayout& l : layouts_) numel += l.numel();
    return absl::FailedPreconditionError(absl::StrFormat(
        "the model differs across the %d dp ranks: dp rank %d has %d units and %d parameters (fingerprint "
        "%016x); every rank must build the same model",
        dp_->size(), dp_->rank(), layouts_.size(), numel, model_fp));
  }
  if (!config_same) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the engine config differs across the %d dp ranks: dp rank %d has fingerprint %016x (zero.stage=%d, "
        "gradient_accumulation_steps=%d); every rank must load the same config",
        dp_->size(), dp_->rank(), config_fp, config.zero().stage(), config.gradient_accumulation_steps()));
  }
  return absl::OkStatus();
}

absl::Status Engine::ResolveCheckpointedUnits() {
  const ActivationCheckpointingOptions& ac = options_.checkpointing;
  const int L = num_units();
  checkpointed_.assign(L, false);
  for (int u = 0; u < L; ++u) {
    switch (ac.policy) {
      case CheckpointPolicy::kNone:
        break;
      case CheckpointPolicy::kEveryUnit:
        checkpointed_[u] = true;
        break;
      case CheckpointPolicy::kEveryKth:
        checkpointed_[u] = u % ac.k == 0;
        break;
      case CheckpointPolicy::kNamed:
        break;
    }
  }
  // The automatic policies leave the last unit alone: its backward runs
  // right after its forward, so dropping its activations would free nothing
  // at the peak and cost a forward (GPT-2's head: the V-wide logits GEMM).
  if (ac.policy != CheckpointPolicy::kNamed) {
    if (L > 0) checkpointed_[L - 1] = false;
    return absl::OkStatus();
  }
  for (const std::string& name : ac.units) {
    int found = -1;
    for (int u = 0; u < L; ++u) {
      if (model_->units[u]->name() == name) found = u;
    }
    if (found < 0) {
      return absl::InvalidArgumentError(absl::StrCat("engine.activation_checkpointing.units: '", name,
                                                     "' is not a unit of the model (", L, " units, first '",
                                                     L > 0 ? model_->units[0]->name() : std::string(), "')"));
    }
    checkpointed_[found] = true;
  }
  return absl::OkStatus();
}

absl::Status Engine::InitParams() {
  const int rank = dp_->rank();
  const DType cd = options_.compute_dtype;
  for (int u = 0; u < num_units(); ++u) {
    const FlatParamLayout& layout = layouts_[u];
    UnitShard& shard = *shards_[u];
    const std::vector<ParamSpec>& specs = model_->units[u]->params();
    if (cd != DType::kF32) {
      // Low precision: f32 values into the master, rounded once into the
      // compute-dtype parameters (no collective: the full f32 tensor is
      // built locally for stages 0-2).
      if (options_.stage < 3) {
        ASSIGN_OR_RETURN(Buffer full, Buffer::Allocate(&tracker_, MemoryCategory::kWorkspace, Device::kCpu,
                                                       DType::kF32, layout.padded_numel()));
        std::memset(full.data(), 0, full.bytes());
        for (size_t p = 0; p < specs.size(); ++p) {
          InitParam(specs[p], options_.seed, full.as<float>() + layout.params()[p].offset);
        }
        std::memcpy(shard.master(), full.as<float>() + shard.master_begin(),
                    shard.master_numel() * sizeof(float));
        RETURN_IF_ERROR(kernels::Cast(compute_.kernels, shard.full_params(), cd, full.data(), DType::kF32,
                                      layout.padded_numel()));
      } else {
        for (const ShardSegment& seg : layout.SegmentsForRank(rank)) {
          InitParamSlice(specs[seg.param_index], options_.seed, seg.offset_in_param,
                         seg.offset_in_param + seg.length, shard.master() + seg.offset_in_shard);
        }
        ASSIGN_OR_RETURN(std::unique_ptr<Work> none, shard.PublishMaster());  // stage 3: local only
        (void)none;
      }
      continue;
    }
    float* full_params = static_cast<float*>(shard.full_params());
    float* param_shard = static_cast<float*>(shard.param_shard());
    if (options_.stage < 3) {
      // Full tensors; the master copy takes its region from them.
      for (size_t p = 0; p < specs.size(); ++p) {
        InitParam(specs[p], options_.seed, full_params + layout.params()[p].offset);
      }
      std::memcpy(shard.master(), full_params + shard.master_begin(), shard.master_numel() * sizeof(float));
    } else {
      // Only the slices this rank owns: InitParamSlice gives the same values.
      for (const ShardSegment& seg : layout.SegmentsForRank(rank)) {
        InitParamSlice(specs[seg.param_index], options_.seed, seg.offset_in_param,
                       seg.offset_in_param + seg.length, param_shard + seg.offset_in_shard);
      }
      std::memcpy(shard.master(), param_shard, shard.master_numel() * sizeof(float));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> Engine::ParamNames() const {
  std::vector<std::string> names;
  for (const FlatParamLayout& l : layouts_) {
    for (const FlatParamInfo& p : l.params()) names.push_back(p.name);
  }
  return names;
}

absl::Status Engine::AgreeOnBatch(absl::Span<const TokenBatch> batches) {
  const int expected = static_cast<int>(batches.size());
  absl::Status local;
  int64_t b = 0, t = 0;
  for (int m = 0; m < expected && local.ok(); ++m) {
    for (const TensorView* v : {&batches[m].inputs, &batches[m].targets}) {
      const char* what = v == &batches[m].inputs ? "inputs" : "targets";
      if (v->dtype != DType::kI32 || v->device != Device::kCpu || v->shape.size() != 2 || v->data == nullptr) {
        local = absl::InvalidArgumentError(absl::StrCat("micro-batch ", m, " ", what, " is ", v->DebugString(), " on ",
                                                        DeviceName(v->device), ", expected i32[B, T] on cpu"));
        break;
      }
      if (m == 0 && v == &batches[m].inputs) {
        b = v->shape[0];
        t = v->shape[1];
      }
      if (v->shape[0] != b || v->shape[1] != t || b < 1 || t < 1) {
        local = absl::InvalidArgumentError(absl::StrCat("micro-batch ", m, " ", what, " is ", v->DebugString(),
                                                        ", expected i32[", b, ", ", t, "] like micro-batch 0 inputs"));
        break;
      }
    }
  }
  const int n = dp_->size();
  std::vector<int32_t> v(4 + n, 0);
  if (local.ok()) {
    v[0] = static_cast<int32_t>(b);
    v[1] = static_cast<int32_t>(t);
    v[2] = -v[0];
    v[3] = -v[1];
  } else {
    v[4 + dp_->rank()] = 1;
  }
  const Clock::time_point issued = Clock::now();
  std::unique_ptr<Work> agree = dp_->AllReduce(v.data(), static_cast<int64_t>(v.size()), DType::kI32, ReduceOp::kMax);
  RETURN_IF_ERROR(WaitTraced(*agree, timeline_.get(), "allreduce", "AllReduce", "batch shapes", issued,
                             static_cast<int64_t>(v.size() * sizeof(int32_t))));
  if (!local.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(local.message(), " (dp rank ", dp_->rank(), ")"));
  }
  std::vector<int> bad;
  for (int r = 0; r < n; ++r) {
    if (v[4 + r] != 0) bad.push_back(r);
  }
  if (!bad.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dp rank(s) ", absl::StrJoin(bad, ", "), " rejected their batch (see their error)"));
  }
  if (v[0] != -v[2] || v[1] != -v[3]) {
    return absl::InvalidArgumentError(absl::StrCat("micro-batch shapes differ across dp ranks: B in [", -v[2], ", ",
                                                   v[0], "], T in [", -v[3], ", ", v[1], "]; this rank has [", b,
                                                   ", ", t, "]"));
  }
  return absl::OkStatus();
}

absl::Status Engine::ParamViews(int u, std::vector<TensorView>* params, std::vector<TensorView>* grads) {
  params->clear();
  if (grads != nullptr) grads->clear();
  UnitShard& shard = *shards_[u];
  const DType cd = options_.compute_dtype;
  for (const FlatParamInfo& p : layouts_[u].params()) {
    params->push_back(View(At(shard.full_params(), cd, p.offset), cd, p.shape));
    if (grads != nullptr) grads->push_back(View(At(shard.full_grads(), cd, p.offset), cd, p.shape));
  }
  for (const Borrowed& b : borrowed_[u]) {
    UnitShard& owner = *shards_[b.owner];
    params->push_back(View(At(owner.full_params(), cd, b.offset), cd, b.shape));
    if (grads != nullptr) grads->push_back(View(At(owner.full_grads(), cd, b.offset), cd, b.shape));
  }
  return absl::OkStatus();
}

absl::Status Engine::ForwardPass(const TokenBatch& batch, bool training, std::vector<Buffer>* outs,
                                 std::vector<std::unique_ptr<SavedActivations>>* saved, float* loss,
                                 StepTimings* t) {
  const int L = num_units();
  const int64_t b = batch.inputs.shape[0], tt = batch.inputs.shape[1];
  outs->clear();
  outs->resize(L);
  saved->clear();
  saved->resize(L);
  kept_inputs_.clear();
  kept_inputs_.resize(L);
  std::vector<TensorView> params;
  for (int i = 0; i < L; ++i) {
    Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(gatherer_->AcquireForward(i));
    t->gather_wait += SecondsSince(t0);
    RETURN_IF_ERROR(ParamViews(i, &params, nullptr));
    TensorView in;
    if (i > 0) in = ActivationView((*outs)[i - 1], b, tt);
    {
      TraceScope span(timeline_.get(), "forward", "forward", model_->units[i]->name(), {{"unit", i}});
      RETURN_IF_ERROR(model_->units[i]->Forward(compute_, params, batch, in, &(*outs)[i], &(*saved)[i]));
    }
    if (training && checkpointed_[i]) {
      // Keep only the input; BackwardPass recomputes the unit from it.
      (*saved)[i].reset();
      if (i > 0) kept_inputs_[i] = std::move((*outs)[i - 1]);
    } else if (i > 0) {
      (*outs)[i - 1].Reset();  // Backward never reads it
    }
    if (!training) (*saved)[i].reset();
    RETURN_IF_ERROR(gatherer_->AfterForward(i));
    TraceMemory();
  }
  const Buffer& last = (*outs)[L - 1];
  if (last.numel() != 1 || last.dtype() != DType::kF32) {
    return absl::InternalError(absl::StrCat("the last unit '", model_->units[L - 1]->name(), "' returned ",
                                            last.numel(), " elements, expected the 1-element f32 loss"));
  }
  *loss = last.as<float>()[0];
  (*outs)[L - 1].Reset();
  return absl::OkStatus();
}

absl::Status Engine::BackwardPass(const TokenBatch& batch, bool reduce,
                                  std::vector<std::unique_ptr<SavedActivations>>* saved, StepTimings* t) {
  const int L = num_units();
  const int64_t b = batch.inputs.shape[0], tt = batch.inputs.shape[1];
  ASSIGN_OR_RETURN(Buffer grad_out, Buffer::Allocate(&tracker_, MemoryCategory::kActivations, Device::kCpu,
                                                     DType::kF32, 1));
  // d(scaled objective)/d(mean loss): the loss scale (1 unless f16) over k.
  grad_out.as<float>()[0] =
      static_cast<float>(scaler_->scale()) / static_cast<float>(options_.accumulation_steps);
  TensorView grad_out_view = View(grad_out.data(), DType::kF32, {1});
  std::vector<TensorView> params, grads;
  int in_flight = -1;  // the last launched bucket, finished when the next one launches
  for (int i = L - 1; i >= 0; --i) {
    Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(gatherer_->AcquireBackward(i));
    t->gather_wait += SecondsSince(t0);
    for (int o : gatherer_->needs(i)) RETURN_IF_ERROR(shards_[o]->EnsureFullGrads());
    RETURN_IF_ERROR(ParamViews(i, &params, &grads));
    if (checkpointed_[i]) {
      // Recompute with the parameters just acquired (gathered under stage 3);
      // the same kernels on the same inputs rebuild the same activations.
      TraceScope span(timeline_.get(), "recompute", "recompute", model_->units[i]->name(), {{"unit", i}});
      TensorView in;
      if (i > 0) in = ActivationView(kept_inputs_[i], b, tt);
      Buffer recomputed_out;
      RETURN_IF_ERROR(model_->units[i]->Forward(compute_, params, batch, in, &recomputed_out, &(*saved)[i]));
      recomputed_out.Reset();
      kept_inputs_[i].Reset();
    }
    Buffer grad_in;
    {
      TraceScope span(timeline_.get(), "backward", "backward", model_->units[i]->name(), {{"unit", i}});
      RETURN_IF_ERROR(
          model_->units[i]->Backward(compute_, params, grads, batch, *(*saved)[i], grad_out_view, &grad_in));
      (*saved)[i].reset();
    }
    grad_out = std::move(grad_in);
    if (i > 0) grad_out_view = ActivationView(grad_out, b, tt);
    RETURN_IF_ERROR(gatherer_->AfterBackward(i));
    if (reduce && options_.stage != 1 && reducer_->closes_bucket(i)) {
      RETURN_IF_ERROR(reducer_->Launch(reducer_->bucket_of(i)));
      if (in_flight >= 0) {
        Clock::time_point t1 = Clock::now();
        RETURN_IF_ERROR(reducer_->Finish(in_flight));
        t->reduce_wait += SecondsSince(t1);
      }
      in_flight = reducer_->bucket_of(i);
    }
    TraceMemory();
  }
  if (reduce && options_.stage == 1) {
    for (int bucket = 0; bucket < reducer_->num_buckets(); ++bucket) RETURN_IF_ERROR(reducer_->Launch(bucket));
  }
  Clock::time_point t1 = Clock::now();
  RETURN_IF_ERROR(reducer_->FinishAll());
  t->reduce_wait += SecondsSince(t1);
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Engine::TrainStep(absl::Span<const TokenBatch> micro_batches) {
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
  absl::Status count_ok =
      static_cast<int>(micro_batches.size()) == options_.accumulation_steps
          ? absl::OkStatus()
          : absl::InvalidArgumentError(absl::StrCat("got ", micro_batches.size(),
                                                    " micro-batches, expected gradient_accumulation_steps=",
                                                    options_.accumulation_steps));
  {
    // A wrong count is reported through the same agreement as a bad shape.
    static const TokenBatch kEmpty;
    absl::Status agreed = count_ok.ok() ? AgreeOnBatch(micro_batches) : AgreeOnBatch({&kEmpty, 1});
    if (!count_ok.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(count_ok.message(), " (dp rank ", dp_->rank(), ")"));
    }
    RETURN_IF_ERROR(agreed);
  }
  absl::Status s = RunStep(micro_batches, &result);
  if (!s.ok()) {
    broken_ = s;
    return s;
  }
  step_span.reset();
  if (timeline_ != nullptr && timeline_->recording()) {
    ++traced_steps_;
    if (trace_steps_ > 0 && traced_steps_ >= trace_steps_) timeline_->set_recording(false);
  }
  result.tokens = micro_batches[0].inputs.shape[0] * micro_batches[0].inputs.shape[1] *
                  options_.accumulation_steps * dp_->size();
  result.timings.total = SecondsSince(start);
  return result;
}

absl::Status Engine::RunStep(absl::Span<const TokenBatch> micro_batches, StepResult* out) {
  StepResult& result = *out;
  const int k = options_.accumulation_steps;
  for (auto& shard : shards_) {
    if (options_.stage <= 1) {
      RETURN_IF_ERROR(shard->ZeroFullGrads());
      RETURN_IF_ERROR(shard->EnsureGradShard());
    } else {
      RETURN_IF_ERROR(shard->ZeroGradShard());
    }
  }
  float loss_sum = 0;
  std::vector<Buffer> outs;
  std::vector<std::unique_ptr<SavedActivations>> saved;
  for (int m = 0; m < k; ++m) {
    float loss = 0;
    Clock::time_point t0 = Clock::now();
    {
      TraceScope span(timeline_.get(), "pass", "forward pass", "", {{"micro_batch", m}});
      RETURN_IF_ERROR(ForwardPass(micro_batches[m], /*training=*/true, &outs, &saved, &loss, &result.timings));
    }
    result.timings.forward += SecondsSince(t0);
    loss_sum += loss;
    const bool reduce = options_.reduce_mode == ReduceMode::kAccumulate || m == k - 1;
    t0 = Clock::now();
    {
      TraceScope span(timeline_.get(), "pass", "backward pass", "", {{"micro_batch", m}});
      RETURN_IF_ERROR(BackwardPass(micro_batches[m], reduce, &saved, &result.timings));
    }
    result.timings.backward += SecondsSince(t0);
  }
  Clock::time_point t0 = Clock::now();
  {
    TraceScope span(timeline_.get(), "optimizer", "optimizer");
    RETURN_IF_ERROR(FinishStep(loss_sum / static_cast<float>(k), &result));
  }
  result.timings.optimizer = SecondsSince(t0);
  return absl::OkStatus();
}

absl::Status Engine::WaitAll(std::vector<IssuedWork>& works, absl::string_view what) {
  for (IssuedWork& w : works) {
    RETURN_IF_ERROR(WaitTraced(*w.work, timeline_.get(), "publish", what, w.shard->layout().unit_name(), w.issued,
                               w.bytes));
  }
  return absl::OkStatus();
}

absl::Status Engine::CheckUsable() const {
  if (broken_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the engine is unusable after a failure in the middle of a collective sequence: ", broken_.message()));
}

absl::Status Engine::FinishStep(float local_loss, StepResult* result) {
  RETURN_IF_ERROR(gatherer_->ReleaseAll());
  if (grad_hook_) {
    for (int u = 0; u < num_units(); ++u) {
      grad_hook_(attempts_, u, shards_[u]->grad_shard(), shards_[u]->layout().shard_numel());
    }
  }
  ++attempts_;
  const double scale = scaler_->scale();
  result->loss_scale = scale;
  double sumsq = 0;
  for (auto& shard : shards_) sumsq += SumOfSquares(shard->grad_shard(), shard->layout().shard_numel());
  // The overflow check is a 0/1 flag summed over the dp group, never the
  // raw values (MPI's MAX over NaN depends on the order). dp is the only
  // group today (tp = pp = 1); with tp/pp it must be the world communicator.
  // It rides in the same all-reduce as the norm and the loss.
  const bool local_nonfinite = !std::isfinite(sumsq);
  float sums[3] = {static_cast<float>(sumsq / (scale * scale)), local_loss, local_nonfinite ? 1.0f : 0.0f};
  Clock::time_point t0 = Clock::now();
  std::unique_ptr<Work> summed = dp_->AllReduce(sums, 3, DType::kF32, ReduceOp::kSum);
  RETURN_IF_ERROR(WaitTraced(*summed, timeline_.get(), "allreduce", "AllReduce", "grad norm, loss, overflow", t0,
                             sizeof(sums)));
  result->timings.publish_wait += SecondsSince(t0);
  result->overflow = sums[2] != 0.0f;
  result->grad_norm = std::sqrt(sums[0]);
  result->loss = sums[1] / static_cast<float>(dp_->size());
  result->lr = static_cast<float>(schedule_->LearningRate(step_ + 1));
  const float coeff = ClipCoefficient(result->grad_norm, options_.grad_clip);
  result->skipped = result->overflow || !std::isfinite(result->grad_norm);
  if (result->skipped) ++skipped_steps_;
  if (!result->skipped) {
    // Unscale and clip in one multiply; exactly nothing at scale 1, no clip.
    const float factor = static_cast<float>(static_cast<double>(coeff) / scale);
    if (coeff < 1.0f || scale != 1.0) {
      for (auto& shard : shards_) {
        float* g = shard->grad_shard();
        for (int64_t i = 0; i < shard->layout().shard_numel(); ++i) g[i] *= factor;
      }
    }
    ++step_;
    std::vector<float*> masters;
    std::vector<const float*> grads;
    // Stage 0 with low-precision compute: the f32 reduced gradients need
    // their own full buffer (the compute-dtype one is too narrow).
    std::vector<Buffer> full_f32;
    if (options_.stage == 0) {
      // Second half of the all-reduce: every rank gets every reduced shard.
      std::vector<IssuedWork> works;
      for (auto& shard : shards_) {
        void* dst = shard->full_grads();
        if (options_.compute_dtype != DType::kF32) {
          ASSIGN_OR_RETURN(Buffer f, Buffer::Allocate(&tracker_, MemoryCategory::kCommBuffers, Device::kCpu,
                                                      DType::kF32, shard->layout().padded_numel()));
          dst = f.data();
          full_f32.push_back(std::move(f));
        } else {
          full_f32.emplace_back();
        }
        if (shard->layout().shard_numel() == 0) continue;
        works.push_back({Clock::now(), shard.get(), shard->layout().padded_numel() * 4, nullptr});
        works.back().work = dp_->AllGather(shard->grad_shard(), dst, shard->layout().shard_numel(), DType::kF32);
      }
      t0 = Clock::now();
      RETURN_IF_ERROR(WaitAll(works, "AllGather grads"));
      result->timings.publish_wait += SecondsSince(t0);
    }
    for (size_t u = 0; u < shards_.size(); ++u) {
      UnitShard& shard = *shards_[u];
      masters.push_back(shard.master());
      if (options_.stage != 0) {
        grads.push_back(shard.grad_shard());
      } else {
        grads.push_back(full_f32[u].empty() ? static_cast<const float*>(shard.full_grads())
                                            : full_f32[u].as<float>());
      }
    }
    {
      TraceScope span(timeline_.get(), "optimizer", "update");
      RETURN_IF_ERROR(optimizer_->Step(masters, grads, result->lr, step_));
    }
    std::vector<IssuedWork> works;
    for (auto& shard : shards_) {
      const Clock::time_point issued = Clock::now();
      ASSIGN_OR_RETURN(std::unique_ptr<Work> w, shard->PublishMaster());
      const int64_t bytes = shard->layout().padded_numel() * static_cast<int64_t>(DTypeSize(options_.compute_dtype));
      if (w != nullptr) works.push_back({issued, shard.get(), bytes, std::move(w)});
    }
    t0 = Clock::now();
    RETURN_IF_ERROR(WaitAll(works, "AllGather params"));
    result->timings.publish_wait += SecondsSince(t0);
  }
  for (auto& shard : shards_) shard->FreeGradShard();
  result->step = step_;
  result->skipped_steps = skipped_steps_;
  // Every rank updates its scaler with the same all-reduced flag.
  absl::Status scaled = scaler_->Update(result->overflow);
  result->overflows = scaler_->overflows();
  result->next_loss_scale = scaler_->scale();
  return scaled;
}

absl::StatusOr<float> Engine::Evaluate(const TokenBatch& batch) {
  RETURN_IF_ERROR(CheckUsable());
  TraceScope span(timeline_.get(), "pass", "eval pass");
  RETURN_IF_ERROR(AgreeOnBatch({&batch, 1}));
  std::vector<Buffer> outs;
  std::vector<std::unique_ptr<SavedActivations>> saved;
  StepTimings timings;
  float loss = 0;
  absl::Status s = ForwardPass(batch, /*training=*/false, &outs, &saved, &loss, &timings);
  absl::Status released = gatherer_->ReleaseAll();
  if (s.ok()) s = released;
  if (s.ok()) {
    const Clock::time_point issued = Clock::now();
    std::unique_ptr<Work> summed = dp_->AllReduce(&loss, 1, DType::kF32, ReduceOp::kSum);
    s = WaitTraced(*summed, timeline_.get(), "allreduce", "AllReduce", "eval loss", issued, sizeof(loss));
  }
  if (!s.ok()) {
    broken_ = s;
    return s;
  }
  return loss / static_cast<float>(dp_->size());
}

absl::StatusOr<std::vector<float>> Engine::GatherParam(absl::string_view name) {
  RETURN_IF_ERROR(CheckUsable());
  for (int u = 0; u < num_units(); ++u) {
    absl::StatusOr<int> p = layouts_[u].FindParam(name);
    if (!p.ok()) continue;
    const FlatParamInfo& info = layouts_[u].params()[*p];
    UnitShard& shard = *shards_[u];
    std::vector<float> out(info.numel);
    if (options_.stage == 0) {
      std::memcpy(out.data(), shard.master() + info.offset, info.numel * sizeof(float));
      return out;
    }
    ASSIGN_OR_RETURN(Buffer full, Buffer::Allocate(&tracker_, MemoryCategory::kWorkspace, Device::kCpu, DType::kF32,
                                                   layouts_[u].padded_numel()));
    absl::Status s = dp_->AllGather(shard.master(), full.data(), layouts_[u].shard_numel(), DType::kF32)->Wait();
    if (!s.ok()) {
      broken_ = s;
      return s;
    }
    std::memcpy(out.data(), full.as<float>() + info.offset, info.numel * sizeof(float));
    return out;
  }
  return absl::NotFoundError(absl::StrCat("no parameter named '", name, "' in the model (", num_units(),
                                          " units; e.g. '", layouts_.empty() || layouts_[0].params().empty()
                                                                ? std::string()
                                                                : layouts_[0].params()[0].name,
                                          "')"));
}

}  // namespace zeroshard

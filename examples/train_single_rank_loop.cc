#include "examples/train_single_rank_loop.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/buffer.h"
#include "core/status_macros.h"
#include "data/batch_plan.h"
#include "kernels/context.h"
#include "kernels/optimizer.h"
#include "nn/resident_model.h"

namespace zeroshard {

float ScheduledLearningRate(const SingleRankTrainOptions& o, int64_t step) {
  if (step < o.warmup_steps) return o.lr * static_cast<float>(step + 1) / static_cast<float>(o.warmup_steps);
  const int64_t decay_steps = o.steps - o.warmup_steps;
  if (decay_steps <= 1) return o.lr;
  const double progress = static_cast<double>(step - o.warmup_steps) / static_cast<double>(decay_steps - 1);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));  // 1 -> 0
  const double min_lr = static_cast<double>(o.lr) * o.final_lr_fraction;
  return static_cast<float>(min_lr + (o.lr - min_lr) * cosine);
}

absl::StatusOr<std::vector<float>> TrainSingleRank(const TokenDataset& dataset, const SingleRankTrainOptions& options,
                                                   const StepCallback& on_step) {
  if (dataset.vocab_size() != options.model.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("dataset vocab_size ", dataset.vocab_size(),
                                                   " differs from the model's ", options.model.vocab_size));
  }
  if (options.seq_len > options.model.seq_len) {
    return absl::InvalidArgumentError(absl::StrCat("seq_len ", options.seq_len,
                                                   " exceeds the model's position table of ", options.model.seq_len));
  }
  if (options.num_threads > 0) kernels::SetCpuThreads(options.num_threads);
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildGpt2(options.model));
  MemoryTracker tracker;
  ComputeContext ctx;
  ctx.tracker = &tracker;
  ASSIGN_OR_RETURN(ResidentModel rm, ResidentModel::Create(model.get(), ctx));
  RETURN_IF_ERROR(rm.InitParams(options.init_seed));

  // AdamW state, f32, flat per unit like the parameters.
  std::vector<Buffer> exp_avg, exp_avg_sq;
  for (int u = 0; u < rm.num_units(); ++u) {
    for (auto* state : {&exp_avg, &exp_avg_sq}) {
      ASSIGN_OR_RETURN(Buffer b, Buffer::AllocateZeroed(&tracker, MemoryCategory::kOptimizerState, Device::kCpu,
                                                  DType::kF32, rm.unit_params(u).numel()));
      state->push_back(std::move(b));
    }
  }

  const BatchPlan plan{options.batch_size, 1, options.accumulation_steps, options.seq_len, options.shuffle_seed};
  ASSIGN_OR_RETURN(BatchSource source, BatchSource::Create(&dataset, plan));
  const int64_t b = plan.micro_batch_size(), t = plan.seq_len;
  std::vector<int32_t> inputs(b * t), targets(b * t);
  const Batch batch = Gpt2Batch(TensorView{inputs.data(), DType::kI32, {b, t}, Device::kCpu},
                                TensorView{targets.data(), DType::kI32, {b, t}, Device::kCpu});

  std::vector<float> losses;
  for (int64_t step = 0; step < options.steps; ++step) {
    RETURN_IF_ERROR(rm.ZeroGrads());
    double loss_sum = 0;
    for (int64_t m = 0; m < options.accumulation_steps; ++m) {
      RETURN_IF_ERROR(source.GetInputsTargets(step, m, 0, absl::MakeSpan(inputs), absl::MakeSpan(targets)));
      // d(objective)/d(loss sum) for the mean over the step's tokens.
      const float dsum = 1.0f / static_cast<float>(options.accumulation_steps * b * t);
      ASSIGN_OR_RETURN(LossTerms loss, rm.ForwardBackward(batch, dsum));
      loss_sum += loss.loss.sum / loss.loss.weight;
    }
    const kernels::AdamWHyper hyper{ScheduledLearningRate(options, step), options.beta1, options.beta2, options.eps, options.weight_decay,
                                    step + 1};
    kernels::AdamWHyper no_decay = hyper;
    no_decay.weight_decay = 0.0f;
    for (int u = 0; u < rm.num_units(); ++u) {
      int64_t offset = 0;
      for (const ParamSpec& spec : model->units[u]->params()) {
        const int64_t n = spec.numel();
        RETURN_IF_ERROR(kernels::AdamWUpdate(ctx.kernels, rm.unit_params(u).as<float>() + offset,
                                             rm.unit_grads(u).as<float>() + offset,
                                             exp_avg[u].as<float>() + offset, exp_avg_sq[u].as<float>() + offset, n,
                                             spec.shape.size() >= 2 ? hyper : no_decay));
        offset += n;
      }
    }
    const float loss = static_cast<float>(loss_sum / static_cast<double>(options.accumulation_steps));
    losses.push_back(loss);
    if (on_step) on_step(step, loss);
  }
  return losses;
}

}  // namespace zeroshard

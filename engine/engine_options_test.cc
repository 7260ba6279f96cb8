#include "engine/engine_options.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(EngineOptionsTest, DefaultConfigMapsToProtoDefaults) {
  absl::StatusOr<EngineOptions> o = EngineOptionsFromConfig(EngineConfig());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->zero.stage(), 0);
  EXPECT_EQ(o->gather.prefetch, 1);
  EXPECT_EQ(o->gather.persistence_threshold, 0);
  EXPECT_TRUE(o->gather.reshard_after_forward);
  EXPECT_EQ(o->bucket_bytes, 26214400);
  EXPECT_EQ(o->reduce_mode, ReduceMode::kAccumulate);
  EXPECT_EQ(o->accumulation_steps, 1);
  EXPECT_EQ(o->optimizer.name, "adamw");
  EXPECT_EQ(o->optimizer.beta1, 0.9f);
  EXPECT_EQ(o->optimizer.beta2, 0.95f);
  EXPECT_EQ(o->optimizer.eps, 1e-8f);
  EXPECT_EQ(o->optimizer.weight_decay, 0.1f);
  EXPECT_TRUE(o->optimizer.no_decay_patterns.empty());
  EXPECT_EQ(o->grad_clip, 1.0f);
  EXPECT_EQ(o->lr_schedule.type, LrScheduleType::kConstant);
  EXPECT_EQ(o->lr_schedule.lr, 3e-4);
  EXPECT_EQ(o->seed, 1234u);
  EXPECT_EQ(o->compute_dtype, DType::kF32);
  EXPECT_EQ(o->reduce_dtype, DType::kF32);
  EXPECT_EQ(o->loss_scale.type, LossScaleType::kNone);
  EXPECT_EQ(o->checkpointing.policy, CheckpointPolicy::kNone);
}

TEST(EngineOptionsTest, F16WithoutLossScaleGetsDynamicDefaults) {
  EngineConfig c;
  c.mutable_precision()->set_compute_dtype(F16);
  c.mutable_precision()->set_reduce_dtype(BF16);
  absl::StatusOr<EngineOptions> o = EngineOptionsFromConfig(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->compute_dtype, DType::kF16);
  EXPECT_EQ(o->reduce_dtype, DType::kBF16);
  EXPECT_EQ(o->loss_scale.type, LossScaleType::kDynamic);
  EXPECT_EQ(o->loss_scale.initial_scale, 65536);
  EXPECT_EQ(o->loss_scale.growth_factor, 2);
  EXPECT_EQ(o->loss_scale.backoff_factor, 0.5);
  EXPECT_EQ(o->loss_scale.growth_interval, 2000);
  EXPECT_EQ(o->loss_scale.hysteresis, 2);
  EXPECT_EQ(o->loss_scale.min_scale, 1);
  EXPECT_FALSE(o->loss_scale.continue_at_min_scale);
}

TEST(EngineOptionsTest, PrecisionAndCheckpointingFieldsAreCarried) {
  EngineConfig c;
  c.mutable_precision()->set_compute_dtype(F16);
  LossScaleConfig* ls = c.mutable_precision()->mutable_loss_scale();
  ls->set_type(LossScaleConfig::STATIC);
  ls->set_initial_scale(512);
  ls->set_growth_factor(3);
  ls->set_backoff_factor(0.25);
  ls->set_growth_interval(7);
  ls->set_hysteresis(4);
  ls->set_min_scale(8);
  ls->set_continue_at_min_scale(true);
  c.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::NAMED);
  c.mutable_activation_checkpointing()->set_k(3);
  c.mutable_activation_checkpointing()->add_units("h.1");
  absl::StatusOr<EngineOptions> o = EngineOptionsFromConfig(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->loss_scale.type, LossScaleType::kStatic);
  EXPECT_EQ(o->loss_scale.initial_scale, 512);
  EXPECT_EQ(o->loss_scale.growth_factor, 3);
  EXPECT_EQ(o->loss_scale.backoff_factor, 0.25);
  EXPECT_EQ(o->loss_scale.growth_interval, 7);
  EXPECT_EQ(o->loss_scale.hysteresis, 4);
  EXPECT_EQ(o->loss_scale.min_scale, 8);
  EXPECT_TRUE(o->loss_scale.continue_at_min_scale);
  EXPECT_EQ(o->checkpointing.policy, CheckpointPolicy::kNamed);
  EXPECT_EQ(o->checkpointing.k, 3);
  EXPECT_EQ(o->checkpointing.units, std::vector<std::string>({"h.1"}));
  c.mutable_precision()->set_compute_dtype(BF16);
  EXPECT_EQ(EngineOptionsFromConfig(c).status().message(),
            "engine.precision.loss_scale: set but compute_dtype is BF16; expected F16");
}

TEST(EngineOptionsTest, EveryFieldIsCarried) {
  EngineConfig c;
  c.mutable_zero()->set_stage(3);
  c.mutable_zero()->set_prefetch(2);
  c.mutable_zero()->set_persistence_threshold(1000);
  c.mutable_zero()->set_reshard_after_forward(false);
  c.mutable_zero()->set_bucket_bytes(4096);
  c.mutable_zero()->set_reduce_mode(ZeroConfig::DEFER);
  c.set_gradient_accumulation_steps(4);
  c.mutable_optimizer()->set_type(OptimizerConfig::SGD);
  c.mutable_optimizer()->set_momentum(0.9);
  c.mutable_optimizer()->set_nesterov(true);
  c.mutable_optimizer()->add_no_decay_patterns("wpe.weight");
  c.mutable_optimizer()->set_grad_clip(0);
  c.mutable_lr_schedule()->set_type(LrScheduleConfig::WARMUP_LINEAR);
  c.mutable_lr_schedule()->set_warmup_steps(10);
  c.mutable_lr_schedule()->set_decay_steps(100);
  c.mutable_lr_schedule()->set_min_lr(1e-5);
  c.mutable_device()->set_threads_per_rank(3);
  c.set_seed(99);
  absl::StatusOr<EngineOptions> o = EngineOptionsFromConfig(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->zero, *ZeroPolicy::ForStage(3));
  EXPECT_EQ(o->gather.prefetch, 2);
  EXPECT_EQ(o->gather.persistence_threshold, 1000);
  EXPECT_FALSE(o->gather.reshard_after_forward);
  EXPECT_EQ(o->bucket_bytes, 4096);
  EXPECT_EQ(o->reduce_mode, ReduceMode::kDefer);
  EXPECT_EQ(o->accumulation_steps, 4);
  EXPECT_EQ(o->optimizer.name, "sgd");
  EXPECT_EQ(o->optimizer.momentum, 0.9f);
  EXPECT_TRUE(o->optimizer.nesterov);
  EXPECT_EQ(o->optimizer.no_decay_patterns, std::vector<std::string>({"wpe.weight"}));
  EXPECT_EQ(o->grad_clip, 0.0f);
  EXPECT_EQ(o->lr_schedule.type, LrScheduleType::kWarmupLinear);
  EXPECT_EQ(o->lr_schedule.warmup_steps, 10);
  EXPECT_EQ(o->lr_schedule.decay_steps, 100);
  EXPECT_EQ(o->lr_schedule.min_lr, 1e-5);
  EXPECT_EQ(o->threads_per_rank, 3);
  EXPECT_EQ(o->seed, 99u);
}

// Lion's betas default to its own 0.9 / 0.99 when unset (proto2 has-bits),
// not to the proto's AdamW defaults; set ones are taken as given.
TEST(EngineOptionsTest, LionTakesItsOwnBetaDefaultsWhenUnset) {
  EngineConfig c;
  c.mutable_optimizer()->set_type(OptimizerConfig::LION);
  absl::StatusOr<EngineOptions> o = EngineOptionsFromConfig(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->optimizer.name, "lion");
  EXPECT_EQ(o->optimizer.beta1, 0.9f);
  EXPECT_EQ(o->optimizer.beta2, 0.99f);
  EXPECT_EQ(o->optimizer.weight_decay, 0.1f);
  c.mutable_optimizer()->set_beta2(0.98);
  o = EngineOptionsFromConfig(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->optimizer.beta1, 0.9f);
  EXPECT_EQ(o->optimizer.beta2, 0.98f);
}

TEST(EngineOptionsTest, RejectsWhatTheEngineCannotRun) {
  EngineConfig c;
  c.mutable_precision()->set_master_dtype(BF16);
  EXPECT_EQ(EngineOptionsFromConfig(c).status().message(), "engine.precision.master_dtype: BF16, expected F32");
  c = EngineConfig();
  c.mutable_activation_checkpointing()->set_k(0);
  EXPECT_EQ(EngineOptionsFromConfig(c).status().message(),
            "engine.activation_checkpointing.k: 0 is out of range [1, inf)");
  c = EngineConfig();
  c.mutable_parallel()->set_sequence_parallel(true);
  EXPECT_EQ(EngineOptionsFromConfig(c).status().message(),
            "engine.parallel.sequence_parallel: true needs engine.parallel.tp > 1 (is 1)");
  c = EngineConfig();
  c.mutable_parallel()->set_tp(2);
  c.mutable_parallel()->set_keep_gathered_ln_outputs(true);
  EXPECT_EQ(EngineOptionsFromConfig(c).status().message(),
            "engine.parallel.keep_gathered_ln_outputs: true needs engine.parallel.sequence_parallel: true (is false)");
  c.mutable_parallel()->set_sequence_parallel(true);
  c.mutable_activation_checkpointing()->set_selective(true);
  EXPECT_EQ(EngineOptionsFromConfig(c).status().message(),
            "engine.parallel.keep_gathered_ln_outputs: true cannot be combined with "
            "engine.activation_checkpointing.selective: true (which drops the LayerNorm outputs it would keep)");
  c = EngineConfig();
  c.mutable_parallel()->set_micro_batches(4);
  EXPECT_EQ(EngineOptionsFromConfig(c).status().message(),
            "engine.parallel.micro_batches: 4 is replaced by engine.gradient_accumulation_steps (the pipeline runs "
            "the step's micro-batches)");
  c = EngineConfig();
  c.mutable_zero()->set_stage(4);
  EXPECT_EQ(EngineOptionsFromConfig(c).status().message(), "engine.zero.stage: 4 is out of range [0, 3]");
  c = EngineConfig();
  c.mutable_lr_schedule()->set_type(LrScheduleConfig::WARMUP_COSINE);
  absl::Status s = EngineOptionsFromConfig(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.message(), "engine.lr_schedule.decay_steps: 0")) << s;
}

}  // namespace
}  // namespace zeroshard

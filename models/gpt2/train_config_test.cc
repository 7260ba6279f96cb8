// GPT-2's TrainConfig through the generic loader (engine/config_loader.h):
// parsing, overrides, the header rule and validation.
#include "models/gpt2/train_config.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "engine/config_loader.h"
#include "engine/config_validation.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "models/registry.h"

namespace zeroshard {
namespace {

constexpr char kValid[] = R"pb(
  model { n_layer: 2 n_head: 2 n_embd: 32 vocab_size: 256 seq_len: 16 }
  data { train_path: "train.bin" batch_size: 12 }
  steps: 10
  engine {
    zero { stage: 3 prefetch: 1 }
    parallel { dp: 3 }
    gradient_accumulation_steps: 2
  }
)pb";

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigLoaderTest, ValidConfigLoadsWithDefaults) {
  absl::StatusOr<TrainConfig> c = LoadTrainConfig(WriteTemp("valid.pbtxt", kValid), {}, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->engine().zero().stage(), 3);
  EXPECT_EQ(c->engine().zero().bucket_bytes(), 25 << 20);
  EXPECT_EQ(c->engine().optimizer().type(), OptimizerConfig::ADAMW);
  EXPECT_EQ(c->engine().comm().timeout_s(), 300);
  EXPECT_EQ(MicroBatchSize(*c), 2);  // 12 / (3 * 2)
}

TEST(ConfigLoaderTest, OverridesApplyAfterParsingAndAreValidated) {
  const std::string path = WriteTemp("over.pbtxt", kValid);
  absl::StatusOr<TrainConfig> c = LoadTrainConfig(
      path,
      {"engine.zero.stage=1", "data.train_path=/tmp/x y.bin", "engine.optimizer.type=SGD",
       "engine.optimizer.no_decay_patterns=.bias", "engine.optimizer.no_decay_patterns=wpe"},
      3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->engine().zero().stage(), 1);
  EXPECT_EQ(c->data().train_path(), "/tmp/x y.bin");
  EXPECT_EQ(c->engine().optimizer().type(), OptimizerConfig::SGD);
  ASSERT_EQ(c->engine().optimizer().no_decay_patterns_size(), 2);
  ASSERT_TRUE(ApplyOverride("engine.optimizer.no_decay_patterns=", &*c).ok());
  EXPECT_EQ(c->engine().optimizer().no_decay_patterns_size(), 0);

  absl::StatusOr<TrainConfig> bad = LoadTrainConfig(path, {"engine.zero.stage=7"}, 3);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), path + ": invalid config:\nengine.zero.stage: 7 is out of range [0, 3]");
}

TEST(ConfigLoaderTest, MissingFileIsNotFound) {
  absl::StatusOr<TrainConfig> c = LoadTrainConfig("/nonexistent/run.pbtxt");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.status().message(), "/nonexistent/run.pbtxt: cannot read config file");
}

TEST(ConfigLoaderTest, HeaderNamesTheMessage) {
  EXPECT_EQ(ConfigMessageName("# proto-message: zeroshard.ClassifierTrainConfig\nsteps: 1\n"),
            "zeroshard.ClassifierTrainConfig");
  EXPECT_EQ(ConfigMessageName("# A comment first.\n\n#proto-message:a.B  # trailing\n#   mpirun -np 2\nsteps: 1\n"),
            "a.B");
  EXPECT_EQ(ConfigMessageName("  # proto-file: examples/x.proto\n  # proto-message: a.B\n"), "a.B");
  // After the first field it is an ordinary comment.
  EXPECT_EQ(ConfigMessageName("steps: 1\n# proto-message: a.B\n"), "");
  EXPECT_EQ(ConfigMessageName("# no header here\nsteps: 1\n"), "");
  EXPECT_EQ(RunConfigMessageName("steps: 1\n"), "zeroshard.TrainConfig");
}

TEST(ConfigLoaderTest, TrainConfigMayNameItself) {
  const std::string path = WriteTemp("named.pbtxt", std::string("# proto-message: zeroshard.TrainConfig\n") + kValid);
  absl::StatusOr<TrainConfig> c = LoadTrainConfig(path, {}, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->engine().zero().stage(), 3);
}

TEST(ConfigLoaderTest, AnotherMessageTypeIsRefusedNamingBoth) {
  const std::string path = WriteTemp("other.pbtxt", "# proto-message: zeroshard.ClassifierTrainConfig\nsteps: 1\n");
  absl::StatusOr<TrainConfig> c = LoadTrainConfig(path);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), path + ": its header names zeroshard.ClassifierTrainConfig ('# proto-message: "
                                         "zeroshard.ClassifierTrainConfig'), but this program reads a "
                                         "zeroshard.TrainConfig");

  // A file without a header is a TrainConfig, not some other message.
  const std::string plain = WriteTemp("plain.pbtxt", "zero { stage: 2 }\n");
  EngineConfig engine;
  absl::Status s = LoadRunConfigMessage(plain, {}, &engine);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), plain + ": has no '# proto-message:' header, so it is a zeroshard.TrainConfig, but this "
                                 "program reads a zeroshard.EngineConfig; start the file with '# proto-message: "
                                 "zeroshard.EngineConfig'");
}

TEST(ConfigLoaderTest, AnyMessageParsesAndTakesOverrides) {
  const std::string path =
      WriteTemp("engine.pbtxt", "# proto-message: zeroshard.EngineConfig\nzero { stage: 2 }\nparallel { dp: 4 }\n");
  EngineConfig engine;
  ASSERT_TRUE(LoadRunConfigMessage(path, {"zero.stage=3", "optimizer.no_decay_patterns=.bias"}, &engine).ok());
  EXPECT_EQ(engine.zero().stage(), 3);
  EXPECT_EQ(engine.parallel().dp(), 4);
  ASSERT_EQ(engine.optimizer().no_decay_patterns_size(), 1);
  absl::Status s = ApplyOverride("zero.stages=1", &engine);
  EXPECT_EQ(s.message(), "--set zero.stages=1: no field 'stages' in zero; fields are: stage, prefetch, "
                         "persistence_threshold, reshard_after_forward, bucket_bytes, reduce_mode, shard_group_size, "
                         "shard_group, "
                         "weight_quantization, gradient_quantization, quantization_block, error_feedback, "
                         "replica_quantization");
  s = ApplyOverride("steps=1", &engine);
  EXPECT_EQ(s.message(), "--set steps=1: no field 'steps' in the config; fields are: zero, precision, optimizer, "
                         "lr_schedule, gradient_accumulation_steps, activation_checkpointing, parallel, comm, "
                         "checkpoint, logging, device, seed, offload, memory_limit_mib");

  const std::string bad = WriteTemp("engine_bad.pbtxt", "# proto-message: zeroshard.EngineConfig\nzero { stag: 2 }\n");
  s = LoadRunConfigMessage(bad, {}, &engine);
  EXPECT_EQ(s.message(), bad + ":2:12: Message type \"zeroshard.ZeroConfig\" has no field named \"stag\".");
}

TEST(ConfigLoaderTest, EngineErrorsNameTheBatchFieldTheyAreGiven) {
  EngineConfig engine;
  engine.mutable_parallel()->set_dp(3);
  ValidationOptions options;
  options.world_size = 2;
  options.batch_field = "data.examples_per_step";
  const std::vector<std::string> errors = EngineConfigErrors(engine, 10, options);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "engine.parallel: dp*tp*pp = 3 but the world has 2 ranks");
  EXPECT_EQ(errors[1],
            "data.examples_per_step: 10 does not split evenly over dp 3 x gradient_accumulation_steps 1 = 3; "
            "expected a multiple of 3");
  EXPECT_EQ(MicroBatchSize(engine, 12), 4);
  // The unit names a NAMED policy lists are the model's business
  // (model_config_validation.h), not this layer's.
  engine.mutable_parallel()->set_dp(2);
  engine.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::NAMED);
  engine.mutable_activation_checkpointing()->add_units("anything");
  EXPECT_TRUE(EngineConfigErrors(engine, 10, options).empty());
}

// What the engine runs: HOST on a CPU device (the same memory), HOST
// optimizer state and masters on a GPU, and optimizer_state,
// master_weights, (stage 3) params and (stages 2-3) grads on NVMe with a
// large enough buffer.
TEST(ConfigLoaderTest, OffloadSettingsTheEngineRunsAreValid) {
  auto errors = [](const char* text) {
    EngineConfig engine;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &engine)) << text;
    return EngineConfigErrors(engine, 48, ValidationOptions());
  };
  using Errors = std::vector<std::string>;
  EXPECT_EQ(errors("offload { optimizer_state: HOST master_weights: HOST grads: HOST }"), Errors{});
  EXPECT_EQ(errors("zero { stage: 3 } offload { params: HOST }"), Errors{});
  EXPECT_EQ(errors("zero { stage: 3 } offload { params: NVME optimizer_state: NVME master_weights: NVME "
                   "nvme_dir: \"/tmp\" buffer_bytes: 12288 }"),
            Errors{});
  // Gradient shards on NVMe under a pipeline and under hybrid sharding.
  EXPECT_EQ(errors("zero { stage: 2 } parallel { dp: 1 pp: 3 } gradient_accumulation_steps: 3 offload { grads: NVME "
                   "nvme_dir: \"/tmp\" }"),
            Errors{});
  EXPECT_EQ(errors("zero { stage: 3 shard_group_size: 1 } parallel { dp: 2 } offload { grads: NVME nvme_dir: "
                   "\"/tmp\" }"),
            Errors{});
  // On a GPU: the ZeRO-Offload split (docs/offload.md, "Host offload on GPU").
  EXPECT_EQ(errors("device { type: CUDA } offload { optimizer_state: HOST master_weights: HOST }"), Errors{});
  EXPECT_EQ(errors("device { type: CUDA } zero { stage: 3 } offload { optimizer_state: HOST master_weights: HOST }"),
            Errors{});
  EXPECT_EQ(errors("offload { optimizer_state: NVME master_weights: NVME nvme_dir: \"/tmp\" buffer_bytes: 12288 } "
                   "memory_limit_mib: 1024"),
            Errors{});
  EXPECT_EQ(errors("optimizer { type: SGD } offload { master_weights: NVME nvme_dir: \"/tmp\" buffer_bytes: 4096 }"),
            Errors{});
  // The engine's own minimum (MinStreamBufferBytes): one 4096-byte granule
  // of each streamed buffer, AdamW's two kinds here.
  EXPECT_EQ(errors("offload { optimizer_state: NVME nvme_dir: \"/tmp\" buffer_bytes: 8192 }"), Errors{});
}

// The pipeline's rules: its shape per schedule, the partition's entries
// and the retired micro_batches field.
TEST(ConfigLoaderTest, PipelineRules) {
  ValidationOptions options;
  auto errors = [&](const char* text) {
    EngineConfig engine;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &engine)) << text;
    return EngineConfigErrors(engine, 48, options);
  };
  using Errors = std::vector<std::string>;
  EXPECT_EQ(errors("parallel { pp: 4 } gradient_accumulation_steps: 8"), Errors{});
  EXPECT_EQ(errors("parallel { pp: 4 pipeline_schedule: INTERLEAVED_1F1B virtual_stages: 2 } "
                   "gradient_accumulation_steps: 6"),
            Errors{"engine.parallel.pipeline_schedule: INTERLEAVED_1F1B needs engine.gradient_accumulation_steps (6) "
                   "to be a multiple of engine.parallel.pp (4)"});
  EXPECT_EQ(errors("parallel { pp: 4 pipeline_schedule: INTERLEAVED_1F1B } gradient_accumulation_steps: 8"),
            Errors{"engine.parallel.pipeline_schedule: INTERLEAVED_1F1B needs engine.parallel.virtual_stages > 1 "
                   "(is 1)"});
  EXPECT_EQ(errors("parallel { pp: 4 virtual_stages: 2 } gradient_accumulation_steps: 8"),
            Errors{"engine.parallel.virtual_stages: 2 needs engine.parallel.pipeline_schedule INTERLEAVED_1F1B (is "
                   "ONE_F_ONE_B)"});
  EXPECT_EQ(errors("parallel { pp: 4 pipeline_schedule: ZERO_BUBBLE_H1 } gradient_accumulation_steps: 2"),
            Errors{"engine.parallel.pipeline_schedule: ZERO_BUBBLE_H1 needs engine.gradient_accumulation_steps (2) >= "
                   "engine.parallel.pp (4)"});
  EXPECT_EQ(errors("parallel { pp: 2 pp_partition: [3, 0, 1] } gradient_accumulation_steps: 2"),
            (Errors{"engine.parallel.pp_partition: 3 entries, expected one per chunk: pp x virtual_stages = 2",
                    "engine.parallel.pp_partition[1]: 0 units, expected >= 1 (a chunk with no units)"}));
  EXPECT_EQ(errors("parallel { pp: 2 virtual_stages: 0 }"),
            Errors{"engine.parallel.virtual_stages: 0 is out of range [1, 1048576]"});
  EXPECT_EQ(errors("parallel { pp: 2 micro_batches: 2 } gradient_accumulation_steps: 2"),
            Errors{"engine.parallel.micro_batches: 2 is set; a pipeline runs engine.gradient_accumulation_steps "
                   "micro-batches per step, expected engine.parallel.micro_batches unset"});
}

struct BadOverride {
  const char* override_text;
  const char* message;
};

TEST(ConfigLoaderTest, BadOverridesNameTheOverride) {
  const BadOverride cases[] = {
      {"engine.zero.stag=1",
       "--set engine.zero.stag=1: no field 'stag' in engine.zero; fields are: stage, prefetch, persistence_threshold, "
       "reshard_after_forward, bucket_bytes, reduce_mode, shard_group_size, shard_group, weight_quantization, "
       "gradient_quantization, quantization_block, error_feedback, "
                         "replica_quantization"},
      {"engine.zero.stage=two", "--set engine.zero.stage=two: 'two' is not valid for engine.zero.stage; expected a "
                                "value of type int32"},
      {"engine.precision.compute_dtype=FP8",
       "--set engine.precision.compute_dtype=FP8: 'FP8' is not valid for engine.precision.compute_dtype; expected "
       "one of F32, BF16, F16"},
      {"engine.optimizer.type=ADAM",
       "--set engine.optimizer.type=ADAM: 'ADAM' is not valid for engine.optimizer.type; expected one of ADAMW, SGD, "
       "LION"},
      {"engine.zero", "--set engine.zero: expected PATH=VALUE, e.g. engine.zero.stage=2"},
      {"engine.zero=1",
       "--set engine.zero=1: engine.zero is a section; set one of its fields: stage, prefetch, "
       "persistence_threshold, reshard_after_forward, bucket_bytes, reduce_mode, shard_group_size, shard_group, "
       "weight_quantization, gradient_quantization, quantization_block, error_feedback, "
                         "replica_quantization"},
      {"steps.x=1", "--set steps.x=1: steps is not a section"},
      {"engine.comm.debug_checks=maybe",
       "--set engine.comm.debug_checks=maybe: 'maybe' is not valid for engine.comm.debug_checks; expected true or "
       "false"},
  };
  for (const BadOverride& b : cases) {
    TrainConfig c;
    absl::Status s = ApplyOverride(b.override_text, &c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.override_text;
    EXPECT_EQ(s.message(), b.message);
  }
}

struct BadConfig {
  const char* name;
  const char* text;  // appended to kValid (later fields override), or whole text
  bool whole;
  int world_size;
  const char* message;  // exact message after "<path>: invalid config:\n", or whole message for syntax errors
};

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, ExactMessageAndCode) {
  const BadConfig& b = GetParam();
  std::string text = b.text;
  if (!b.whole) {  // Merge the snippet over the valid config.
    TrainConfig merged = *ParseTrainConfig(kValid, "valid");
    ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(b.text, &merged)) << b.text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(merged, &text));
  }
  const std::string path = WriteTemp(std::string(b.name) + ".pbtxt", text);
  absl::StatusOr<TrainConfig> c = LoadTrainConfig(path, {}, b.world_size);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  std::string expected = std::string(b.message);
  size_t pos;
  while ((pos = expected.find("PATH")) != std::string::npos) expected.replace(pos, 4, path);
  EXPECT_EQ(std::string(c.status().message()), expected);
}

const BadConfig kBadConfigs[] = {
    {"syntax_missing_brace", "model { n_layer: 2\n", true, -1,
     "PATH:2:1: Expected identifier, got: "},
    {"syntax_bad_value", "steps: ten\n", true, -1, "PATH:1:8: Expected integer, got: ten"},
    {"unknown_field", "engine {\n  zero { stages: 2 }\n}\n", true, -1,
     "PATH:2:16: Message type \"zeroshard.ZeroConfig\" has no field named \"stages\"."},
    {"unknown_enum", "engine { precision { compute_dtype: FP8 } }", true, -1,
     "PATH:1:41: Unknown enumeration value of \"FP8\" for field \"compute_dtype\"."},
    {"duplicate_section", "steps: 1\nsteps: 2\n", true, -1,
     "PATH:2:6: Non-repeated field \"steps\" is specified multiple times."},
    {"stage_out_of_range", "engine { zero { stage: 4 } }", false, 3,
     "PATH: invalid config:\nengine.zero.stage: 4 is out of range [0, 3]"},
    {"world_mismatch", "engine { parallel { dp: 8 } } data { batch_size: 16 }", false, 4,
     "PATH: invalid config:\nengine.parallel: dp*tp*pp = 8 but the world has 4 ranks"},
    {"batch_does_not_split", "data { batch_size: 10 }", false, 3,
     "PATH: invalid config:\ndata.batch_size: 10 does not split evenly over dp 3 x gradient_accumulation_steps 2 = 6; "
     "expected a multiple of 6"},
    {"loss_scale_with_bf16", "engine { precision { compute_dtype: BF16 loss_scale { initial_scale: 1024 } } }", false, 3,
     "PATH: invalid config:\nengine.precision.loss_scale is set but compute dtype is bf16; loss scaling applies to F16 "
     "only"},
    {"heads_do_not_divide", "model { n_head: 5 }", false, 3,
     "PATH: invalid config:\nmodel.n_head: 5 does not divide model.n_embd = 32"},
    {"negative_lr", "engine { optimizer { lr: -0.1 } }", false, 3,
     "PATH: invalid config:\nengine.optimizer.lr: -0.1 is out of range; expected > 0\n"
     "engine.lr_schedule.min_lr: 0 is out of range [0, engine.optimizer.lr = -0.1]"},
    {"beta_one", "engine { optimizer { beta2: 1.0 } }", false, 3,
     "PATH: invalid config:\nengine.optimizer.beta2: 1 is out of range [0, 1)"},
    {"nesterov_without_momentum", "engine { optimizer { type: SGD nesterov: true } }", false, 3,
     "PATH: invalid config:\nengine.optimizer.nesterov: needs momentum > 0 and dampening 0; got momentum 0, "
     "dampening 0"},
    {"adamw_given_momentum", "engine { optimizer { momentum: 0 } }", false, 3,
     "PATH: invalid config:\nengine.optimizer.momentum: set, but ADAMW does not take it; expected unset (ADAMW takes "
     "beta1, beta2, eps besides lr, weight_decay, no_decay_patterns, grad_clip)"},
    {"lion_given_sgd_fields", "engine { optimizer { type: LION momentum: 0.9 dampening: 0.1 nesterov: false } }",
     false, 3,
     "PATH: invalid config:\nengine.optimizer.momentum: set, but LION does not take it; expected unset (LION takes "
     "beta1, beta2 besides lr, weight_decay, no_decay_patterns, grad_clip)\nengine.optimizer.dampening: set, but LION "
     "does not take it; expected unset (LION takes beta1, beta2 besides lr, weight_decay, no_decay_patterns, "
     "grad_clip)\nengine.optimizer.nesterov: set, but LION does not take it; expected unset (LION takes beta1, beta2 "
     "besides lr, weight_decay, no_decay_patterns, grad_clip)"},
    {"lion_given_eps", "engine { optimizer { type: LION eps: 1e-8 } }", false, 3,
     "PATH: invalid config:\nengine.optimizer.eps: set, but LION does not take it; expected unset (LION takes beta1, "
     "beta2 besides lr, weight_decay, no_decay_patterns, grad_clip)"},
    {"lion_beta_one", "engine { optimizer { type: LION beta1: 1 } }", false, 3,
     "PATH: invalid config:\nengine.optimizer.beta1: 1 is out of range [0, 1)"},
    {"sgd_given_eps", "engine { optimizer { type: SGD eps: 1e-8 } }", false, 3,
     "PATH: invalid config:\nengine.optimizer.eps: set, but SGD does not take it; expected unset (SGD takes momentum, "
     "dampening, nesterov besides lr, weight_decay, no_decay_patterns, grad_clip)"},
    {"tensor_parallel", "engine { parallel { dp: 1 tp: 3 } }", false, 3,
     "PATH: invalid config:\nmodel.n_head: 2 is not a multiple of engine.parallel.tp = 3 (each tp rank holds whole "
     "heads)\nmodel.n_embd: 32 is not a multiple of engine.parallel.tp = 3"},
    {"sequence_parallel_seq_len", "model { seq_len: 15 } engine { parallel { dp: 1 tp: 2 sequence_parallel: true } }",
     false, 2,
     "PATH: invalid config:\nmodel.seq_len: 15 is not a multiple of engine.parallel.tp = 2 "
     "(engine.parallel.sequence_parallel splits the sequence)"},
    {"tp_world_mismatch", "engine { parallel { dp: 2 tp: 2 } }", false, 3,
     "PATH: invalid config:\nengine.parallel: dp*tp*pp = 4 but the world has 3 ranks"},
    {"sequence_parallel_without_tp", "engine { parallel { sequence_parallel: true } }", false, 3,
     "PATH: invalid config:\nengine.parallel.sequence_parallel: true needs engine.parallel.tp > 1 (is 1)"},
    {"keep_gathered_without_sequence_parallel", "engine { parallel { dp: 1 tp: 3 keep_gathered_ln_outputs: true } }",
     false, 3,
     "PATH: invalid config:\nmodel.n_head: 2 is not a multiple of engine.parallel.tp = 3 (each tp rank holds whole "
     "heads)\nmodel.n_embd: 32 is not a multiple of engine.parallel.tp = 3\nengine.parallel.keep_gathered_ln_outputs: "
     "true needs engine.parallel.sequence_parallel: true (is false)"},
    {"keep_gathered_with_selective",
     "engine { parallel { dp: 1 tp: 2 sequence_parallel: true keep_gathered_ln_outputs: true } "
     "activation_checkpointing { selective: true } }",
     false, 2,
     "PATH: invalid config:\nengine.parallel.keep_gathered_ln_outputs: true cannot be combined with "
     "engine.activation_checkpointing.selective: true (which drops the LayerNorm outputs it would keep)"},
    {"master_bf16", "engine { precision { master_dtype: BF16 } }", false, 3,
     "PATH: invalid config:\nengine.precision.master_dtype: BF16 is not allowed; expected F32"},
    {"preempt_deadline_zero", "engine { checkpoint { preempt_deadline_s: 0 } }", false, 3,
     "PATH: invalid config:\nengine.checkpoint.preempt_deadline_s: 0 is out of range; expected > 0"},
    {"preempt_deadline_negative", "engine { checkpoint { preempt_deadline_s: -5 } }", false, 3,
     "PATH: invalid config:\nengine.checkpoint.preempt_deadline_s: -5 is out of range; expected > 0"},
    {"async_save_without_dir", "engine { checkpoint { async_save: true interval: 2 } }", false, 3,
     "PATH: invalid config:\nengine.checkpoint.async_save: true needs engine.checkpoint.dir (empty: checkpoints are "
     "off)"},
    {"async_save_interval_zero", "engine { checkpoint { dir: \"/tmp/ck\" async_save: true } }", false, 3,
     "PATH: invalid config:\nengine.checkpoint.async_save: true with engine.checkpoint.interval 0 saves only at the "
     "end, with no training to overlap; expected engine.checkpoint.interval > 0, or async_save false"},
    {"named_without_units", "engine { activation_checkpointing { policy: NAMED } }", false, 3,
     "PATH: invalid config:\nengine.activation_checkpointing.units: policy NAMED needs at least one unit name"},
    {"decay_before_warmup", "engine { lr_schedule { type: WARMUP_COSINE warmup_steps: 10 decay_steps: 5 } }", false, 3,
     "PATH: invalid config:\nengine.lr_schedule.decay_steps: 5 must be greater than warmup_steps 10"},
    {"eval_without_val", "eval_interval: 5", false, 3,
     "PATH: invalid config:\neval_interval: 5 needs data.val_path to be set"},
    {"no_train_path", "model { vocab_size: 1 }", true, -1,
     "PATH: invalid config:\nmodel.vocab_size: 1 is out of range [2, 1048576]\ndata.train_path: must be set to a "
     "token file"},
    {"nccl_on_cpu", "engine { comm { backend: NCCL timeout_s: 0 } }", false, 3,
     "PATH: invalid config:\nengine.comm.timeout_s: 0 is out of range; expected > 0\nengine.comm.backend: NCCL needs "
     "engine.device.type CUDA; got CPU"},
    {"gpu_id_on_cpu", "engine { device { gpu_id: -1 } }", false, 3,
     "PATH: invalid config:\nengine.device.gpu_id: -1 is out of range; expected >= 0\nengine.device.gpu_id: set but "
     "engine.device.type is CPU"},
    {"accumulation_zero", "engine { gradient_accumulation_steps: 0 }", false, 3,
     "PATH: invalid config:\nengine.gradient_accumulation_steps: 0 is out of range [1, 1048576]"},
    {"negative_trace_steps", "engine { logging { trace_path: \"t.json\" trace_steps: -1 } }", false, 3,
     "PATH: invalid config:\nengine.logging.trace_steps: -1 is out of range; expected >= 0"},
    {"micro_batches_set", "engine { parallel { micro_batches: 4 } }", false, 3,
     "PATH: invalid config:\nengine.parallel.micro_batches: 4 is set; a pipeline runs "
     "engine.gradient_accumulation_steps micro-batches per step, expected engine.parallel.micro_batches unset"},
    {"micro_batches_set_to_one", "engine { parallel { micro_batches: 1 } }", false, 3,
     "PATH: invalid config:\nengine.parallel.micro_batches: 1 is set; a pipeline runs "
     "engine.gradient_accumulation_steps micro-batches per step, expected engine.parallel.micro_batches unset"},
    {"pipeline_too_few_micro_batches", "engine { parallel { dp: 1 pp: 3 pipeline_schedule: ZERO_BUBBLE_H1 } }", false,
     3,
     "PATH: invalid config:\nengine.parallel.pipeline_schedule: ZERO_BUBBLE_H1 needs "
     "engine.gradient_accumulation_steps (2) >= engine.parallel.pp (3)"},
    {"virtual_stages_without_pp", "engine { parallel { virtual_stages: 2 } }", false, 3,
     "PATH: invalid config:\nengine.parallel.virtual_stages: 2 is set but pp is 1; expected 1"},
    {"partition_without_pp", "engine { parallel { pp_partition: [1, 2] } }", false, 3,
     "PATH: invalid config:\nengine.parallel.pp_partition: set (2 entries) but pp is 1; expected empty"},
    {"shard_group_not_dividing_dp", "engine { zero { shard_group_size: 2 } }", false, 3,
     "PATH: invalid config:\nengine.zero.shard_group_size: 2 does not divide engine.parallel.dp = 3; expected a "
     "divisor of 3 (or 0: all of dp)"},
    {"per_host_with_shard_group_size", "engine { zero { shard_group: PER_HOST shard_group_size: 3 } }", false, 3,
     "PATH: invalid config:\nengine.zero.shard_group: PER_HOST takes the shard group size from the hosts, but "
     "engine.zero.shard_group_size is 3; expected 0 (unset)"},
    {"weight_quantization_without_gathers", "engine { zero { stage: 2 weight_quantization: INT8 } }", false, 3,
     "PATH: invalid config:\nengine.zero.weight_quantization: INT8 needs engine.zero.stage 3 (stages 0-2 gather no "
     "weights); got stage 2"},
    {"quantization_block_too_small", "engine { zero { quantization_block: 16 } }", false, 3,
     "PATH: invalid config:\nengine.zero.quantization_block: 16 is out of range; expected >= 32"},
    {"error_feedback_without_quantization", "engine { zero { error_feedback: true } }", false, 3,
     "PATH: invalid config:\nengine.zero.error_feedback: true needs engine.zero.gradient_quantization INT8 (is NONE)"},
    {"replica_quantization_without_replicas", "engine { zero { replica_quantization: INT8 } }", false, 3,
     "PATH: invalid config:\nengine.zero.replica_quantization: INT8 needs a replica group, but "
     "engine.zero.shard_group_size is 0 with engine.parallel.dp = 3 (one replica); expected a shard group size in "
     "(0, dp) or shard_group: PER_HOST on several hosts"},
    {"gradient_quantization_with_reduce_dtype",
     "engine { zero { gradient_quantization: INT8 } precision { compute_dtype: BF16 reduce_dtype: BF16 } }", false, 3,
     "PATH: invalid config:\nengine.precision.reduce_dtype: BF16 is set with engine.zero.gradient_quantization INT8, "
     "which replaces it; expected F32 (unset)"},
    {"offload_nvme_without_dir", "engine { offload { master_weights: NVME optimizer_state: NVME } }", false, 3,
     "PATH: invalid config:\nengine.offload.nvme_dir: empty, but engine.offload.optimizer_state is NVME; expected a "
     "directory for the offload files"},
    {"offload_params_below_stage_3", "engine { zero { stage: 2 } offload { params: HOST } }", false, 3,
     "PATH: invalid config:\nengine.offload.params: HOST needs ZeRO stage 3 (parameter shards); engine.zero.stage is "
     "2"},
    {"offload_params_nvme_below_stage_3", "engine { zero { stage: 2 } offload { params: NVME nvme_dir: \"/tmp\" } }",
     false, 3,
     "PATH: invalid config:\nengine.offload.params: NVME needs ZeRO stage 3 (parameter shards); engine.zero.stage is "
     "2"},
    {"offload_grads_nvme_below_stage_2",
     "engine { zero { stage: 1 } gradient_accumulation_steps: 1 offload { grads: NVME nvme_dir: \"/tmp\" } }", false,
     3,
     "PATH: invalid config:\nengine.offload.grads: NVME needs ZeRO stage 2 or 3 (an f32 gradient shard at rest); "
     "engine.zero.stage is 1"},
    {"offload_host_grads_on_cuda",
     "engine { device { type: CUDA } offload { optimizer_state: HOST master_weights: HOST grads: HOST } }", false, 3,
     "PATH: invalid config:\nengine.offload.grads: HOST is not supported yet on engine.device.type CUDA; expected "
     "DEVICE"},
    {"offload_host_params_on_cuda", "engine { device { type: CUDA } zero { stage: 3 } offload { params: HOST } }",
     false, 3,
     "PATH: invalid config:\nengine.offload.params: HOST is not supported yet on engine.device.type CUDA; expected "
     "DEVICE"},
    {"offload_host_state_alone_on_cuda", "engine { device { type: CUDA } offload { optimizer_state: HOST } }", false,
     3,
     "PATH: invalid config:\nengine.offload.optimizer_state: HOST on engine.device.type CUDA needs "
     "engine.offload.master_weights: HOST too (the update runs on the CPU over both); got DEVICE"},
    {"offload_host_masters_alone_on_cuda", "engine { device { type: CUDA } offload { master_weights: HOST } }", false,
     3,
     "PATH: invalid config:\nengine.offload.master_weights: HOST on engine.device.type CUDA needs "
     "engine.offload.optimizer_state: HOST too (the update runs on the CPU over both); got DEVICE"},
    {"offload_ranges", "engine { offload { buffer_count: 1 queue_depth: 0 } memory_limit_mib: -1 }", false, 3,
     "PATH: invalid config:\nengine.offload.buffer_count: 1 is out of range [2, 64]\nengine.offload.queue_depth: 0 "
     "is out of range [1, 256]\nengine.memory_limit_mib: -1 is out of range; expected >= 0"},
    {"offload_buffer_bytes_not_aligned", "engine { offload { buffer_bytes: 10000 } }", false, 3,
     "PATH: invalid config:\nengine.offload.buffer_bytes: 10000 is not a multiple of 4096"},
    {"offload_buffer_bytes_below_the_unit",
     "engine { offload { optimizer_state: NVME master_weights: NVME nvme_dir: \"/tmp\" buffer_bytes: 8192 } }", false,
     3,
     "PATH: invalid config:\nengine.offload.buffer_bytes: 8192 is smaller than the largest bucket's alignment unit "
     "12288 (4096 bytes for each of 3 streamed state buffers)"},
    // Only what streams counts: AdamW's two kinds without the master.
    {"offload_buffer_bytes_below_the_state_unit",
     "engine { offload { optimizer_state: NVME nvme_dir: \"/tmp\" buffer_bytes: 4096 } }", false, 3,
     "PATH: invalid config:\nengine.offload.buffer_bytes: 4096 is smaller than the largest bucket's alignment unit "
     "8192 (4096 bytes for each of 2 streamed state buffers)"},
    {"offload_nvme_on_cuda",
     "engine { device { type: CUDA } offload { optimizer_state: NVME master_weights: NVME nvme_dir: \"/tmp\" } }",
     false, 3,
     "PATH: invalid config:\nengine.offload.optimizer_state: NVME is not supported yet on engine.device.type CUDA; "
     "expected DEVICE or HOST\nengine.offload.master_weights: NVME is not supported yet on engine.device.type CUDA; "
     "expected DEVICE or HOST"},
    {"offload_buffer_bytes_sgd_without_momentum",
     "engine { optimizer { type: SGD } offload { master_weights: NVME nvme_dir: \"/tmp\" buffer_bytes: 0 } }", false,
     3,
     "PATH: invalid config:\nengine.offload.buffer_bytes: 0 is smaller than the largest bucket's alignment unit 4096 "
     "(4096 bytes for each of 1 streamed state buffer)"},
};

INSTANTIATE_TEST_SUITE_P(Table, BadConfigTest, ::testing::ValuesIn(kBadConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace zeroshard

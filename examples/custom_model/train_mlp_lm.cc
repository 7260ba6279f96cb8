// The embedding guide's complete trainer (docs/guide.md): your own model,
// zeroshard's Engine, a config file, checkpoints. Run under mpirun:
//   mpirun -np 2 bazel-bin/examples/custom_model/train_mlp_lm CONFIG.pbtxt CKPT_DIR
// It reads GPT-2's run config (models/gpt2/gpt2_config.proto): the model
// section supplies n_layer, vocab_size, seq_len, n_embd.
#include <mpi.h>

#include <iostream>

#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/run_record.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "engine/engine_runtime.h"
#include "core/status_macros.h"
#include "data/batch_plan.h"
#include "data/token_file.h"
#include "engine/engine.h"
#include "models/gpt2/train_config.h"
#include "models/mlp_lm/mlp_lm.h"

namespace zeroshard {

absl::Status Train(const std::string& config_path, const std::string& checkpoint_dir) {
  // 1. MPI, the config (validated for this world size), the process grid.
  RETURN_IF_ERROR(EnsureMpiInitialized());
  int world_size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  ASSIGN_OR_RETURN(TrainConfig config, LoadTrainConfig(config_path, {}, world_size));
  const EngineConfig& ec = config.engine();
  // The rank's device (engine.device) and a grid of engine.parallel's shape.
  ASSIGN_OR_RETURN(EngineRuntime runtime, CreateEngineRuntime(ec, CommOptions{}));
  ProcessGrid& grid = *runtime.grid;

  // 2. Your model as units; the engine shards, gathers and trains it.
  const ModelConfig& m = config.model();
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(ec, &grid, BuildMlpLm(m.n_layer(), m.vocab_size(), m.seq_len(), m.n_embd())));

  // 3. Data: each rank reads its own micro-batches of every global batch.
  ASSIGN_OR_RETURN(TokenDataset tokens, TokenDataset::Open(config.data().train_path(), m.vocab_size()));
  ASSIGN_OR_RETURN(BatchSource source, BatchSource::Create(&tokens, {config.data().batch_size(), ec.parallel().dp(),
                                                                     ec.gradient_accumulation_steps(), m.seq_len()}));
  const int64_t rows = source.plan().micro_batch_size();
  std::vector<std::vector<int32_t>> in(ec.gradient_accumulation_steps(), std::vector<int32_t>(rows * m.seq_len()));
  std::vector<std::vector<int32_t>> tgt = in;
  std::vector<Batch> micro(in.size());

  // 4. The loop: one TrainStep per optimizer step; the timeline trace when
  // the config names one (engine.logging.trace_path); a checkpoint at the end.
  for (int64_t step = 0; step < config.steps(); ++step) {
    for (size_t k = 0; k < in.size(); ++k) {
      RETURN_IF_ERROR(source.GetInputsTargets(step, k, grid.dp_rank(), absl::MakeSpan(in[k]), absl::MakeSpan(tgt[k])));
      // A batch is named tensors with rows on dimension 0; the units read them by name.
      micro[k] = Batch{{"inputs", {in[k].data(), DType::kI32, {rows, m.seq_len()}, Device::kCpu}},
                       {"targets", {tgt[k].data(), DType::kI32, {rows, m.seq_len()}, Device::kCpu}}};
    }
    ASSIGN_OR_RETURN(StepResult r, engine->TrainStep(micro));
    if (grid.world().rank() == 0 && (step + 1) % 10 == 0) {
      std::cout << "step " << step + 1 << " loss " << r.loss << " grad_norm " << r.grad_norm << std::endl;
    }
    if (engine->trace_due()) RETURN_IF_ERROR(engine->WriteTrace().status());
  }
  if (engine->timeline() != nullptr) RETURN_IF_ERROR(engine->WriteTrace().status());  // no-op once written
  const DataPosition position{config.steps() * int64_t{config.data().batch_size()}, 0};
  // The manifest records the run: this model's name and its whole config.
  return SaveCheckpoint(*engine, checkpoint_dir, config.steps(), MakeRunRecord("mlp_lm", config, ec), position);
}

}  // namespace zeroshard

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: train_mlp_lm CONFIG.pbtxt CHECKPOINT_DIR\n";
    return 2;
  }
  absl::Status s = zeroshard::Train(argv[1], argv[2]);
  // An error every rank hits, printed once and before MPI_Finalize (mpirun
  // kills the job once another rank exits 1).
  if (zeroshard::ShouldReportError(s)) std::cerr << "train_mlp_lm: " << s << std::endl;
  zeroshard::FinalizeMpi();
  return s.ok() ? 0 : 1;
}

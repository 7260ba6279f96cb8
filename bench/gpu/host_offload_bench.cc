// Host offload on one GPU (docs/offload.md, "Host offload on GPU"): GPT-2
// trained with engine.offload.optimizer_state and master_weights DEVICE,
// then HOST, alternating, --repeats times; per run the median step after
// warm-up. Prints a markdown table: median step and tokens/s, the device
// pool's peak (cudaMemPoolAttrUsedMemHigh), the host bytes the tracker
// counts for masters, state and pinned staging, and the device memory freed
// against the theory (masters and AdamW state: 12 bytes a parameter of the
// rank's regions). Ratios are of medians over the repeats, each repeat
// running both settings back to back.
//
// Without a usable GPU it prints why and exits 0. Run under `mpirun -np 1`.
//
//   host_offload_bench [--n_layer=12 --n_embd=768 --n_head=12] [--batch=8] [--seq=1024] [--stage=1]
//                      [--warmup=2] [--steps=6] [--repeats=3]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/common/bench_util.h"
#include "core/device.h"
#include "core/status_macros.h"
#include "engine/engine.h"
#include "engine/engine_runtime.h"
#include "models/gpt2/gpt2.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime.h>
#endif

ABSL_FLAG(int, batch, 8, "sequences per optimizer step");
ABSL_FLAG(int, seq, 1024, "tokens per sequence (at most 1024)");
ABSL_FLAG(int, stage, 1, "ZeRO stage (dp 1: the regions are the whole model)");
ABSL_FLAG(int, warmup, 2, "untimed steps per run");
ABSL_FLAG(int, steps, 6, "timed steps per run; the median is kept");
ABSL_FLAG(int, repeats, 3, "runs of each setting, alternating");
ABSL_FLAG(int, n_layer, 12, "layers");
ABSL_FLAG(int, n_head, 12, "heads");
ABSL_FLAG(int, n_embd, 768, "channels");
ABSL_FLAG(int, vocab, 50257, "vocabulary");

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

struct RunResult {
  double step_s = 0;
  int64_t device_peak = 0;  // the device pool's high-water mark
  int64_t host_bytes = 0;   // masters, state and staging the tracker counts
  int64_t host_state = 0;   // masters and state alone
  float loss = 0;
};

#ifdef ZEROSHARD_HAS_CUDA
absl::Status CudaCheck(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string(call) + ": " + cudaGetErrorString(err));
}

// Resets the current device's default pool's high-water mark to what is in
// use now (after the previous run's memory went back to the pool).
absl::Status ResetPoolPeak(cudaMemPool_t* pool) {
  int device = 0;
  RETURN_IF_ERROR(CudaCheck(cudaGetDevice(&device), "cudaGetDevice"));
  RETURN_IF_ERROR(CudaCheck(cudaDeviceGetDefaultMemPool(pool, device), "cudaDeviceGetDefaultMemPool"));
  RETURN_IF_ERROR(CudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  RETURN_IF_ERROR(CudaCheck(cudaMemPoolTrimTo(*pool, 0), "cudaMemPoolTrimTo"));
  uint64_t zero = 0;
  return CudaCheck(cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrUsedMemHigh, &zero), "cudaMemPoolSetAttribute");
}
#endif

absl::StatusOr<RunResult> RunOnce(const EngineConfig& ec, ProcessGrid* grid, const Gpt2Config& mc,
                                  const std::vector<Batch>& views) {
  RunResult out;
#ifdef ZEROSHARD_HAS_CUDA
  cudaMemPool_t pool = nullptr;
  RETURN_IF_ERROR(ResetPoolPeak(&pool));
#endif
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildGpt2(mc));
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(ec, grid, std::move(model)));
  const int warmup = std::max(0, absl::GetFlag(FLAGS_warmup)), steps = std::max(1, absl::GetFlag(FLAGS_steps));
  std::vector<double> step_s;
  for (int s = 0; s < warmup + steps; ++s) {
    const auto t0 = Clock::now();
    ASSIGN_OR_RETURN(StepResult r, engine->TrainStep(views));
#ifdef ZEROSHARD_HAS_CUDA
    RETURN_IF_ERROR(CudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
#endif
    if (!std::isfinite(r.loss)) return absl::InternalError("non-finite loss");
    if (s >= warmup) step_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    out.loss = r.loss;
  }
  out.step_s = bench::Median(step_s);
  const MemoryTracker& t = engine->memory();
  out.host_state = t.Usage(MemoryCategory::kMasterParams).current + t.Usage(MemoryCategory::kOptimizerState).current;
  out.host_bytes = out.host_state + t.Usage(MemoryCategory::kOffloadStaging).current;
#ifdef ZEROSHARD_HAS_CUDA
  uint64_t high = 0;
  RETURN_IF_ERROR(
      CudaCheck(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high), "cudaMemPoolGetAttribute"));
  out.device_peak = static_cast<int64_t>(high);
#endif
  return out;
}

double MiB(int64_t b) { return static_cast<double>(b) / (1 << 20); }

int Run() {
  std::string reason;
  if (!CudaAvailable(&reason)) {
    std::printf("host_offload_bench: skipped: %s\n", reason.c_str());
    return 0;
  }
  const int batch = absl::GetFlag(FLAGS_batch), seq = absl::GetFlag(FLAGS_seq);
  if (batch < 1 || seq < 1 || seq > 1024) {
    std::fprintf(stderr, "host_offload_bench: need --batch >= 1 and 1 <= --seq <= 1024\n");
    return 2;
  }
  Gpt2Config mc;
  mc.n_layer = absl::GetFlag(FLAGS_n_layer);
  mc.n_head = absl::GetFlag(FLAGS_n_head);
  mc.n_embd = absl::GetFlag(FLAGS_n_embd);
  mc.vocab_size = absl::GetFlag(FLAGS_vocab);
  mc.seq_len = 1024;

  EngineConfig ec;
  ec.mutable_zero()->set_stage(absl::GetFlag(FLAGS_stage));
  ec.mutable_parallel()->set_dp(1);
  ec.mutable_precision()->set_compute_dtype(BF16);
  ec.mutable_device()->set_type(DeviceConfig::CUDA);
  ec.mutable_optimizer()->set_lr(6e-4);
  CommOptions options;
  options.timeout = absl::Minutes(5);
  absl::StatusOr<EngineRuntime> runtime = CreateEngineRuntime(ec, options);
  bench::CheckOrExit(runtime.status(), "CreateEngineRuntime");
  absl::StatusOr<std::unique_ptr<Model>> probe = BuildGpt2(mc);
  bench::CheckOrExit(probe.status(), "BuildGpt2");
  const int64_t psi = (*probe)->num_logical_params();

  std::mt19937 rng(1234);
  std::vector<int32_t> inputs, targets;
  for (int b = 0; b < batch; ++b) {
    std::vector<int32_t> row(static_cast<size_t>(seq) + 1);
    for (int32_t& t : row) t = static_cast<int32_t>(rng() % mc.vocab_size);
    inputs.insert(inputs.end(), row.begin(), row.end() - 1);
    targets.insert(targets.end(), row.begin() + 1, row.end());
  }
  const std::vector<Batch> views = {Gpt2Batch(TensorView{inputs.data(), DType::kI32, {batch, seq}, Device::kCpu},
                                              TensorView{targets.data(), DType::kI32, {batch, seq}, Device::kCpu})};

  const char* names[2] = {"DEVICE", "HOST"};
  std::vector<RunResult> runs[2];
  for (int r = 0; r < std::max(1, absl::GetFlag(FLAGS_repeats)); ++r) {
    for (int k = 0; k < 2; ++k) {
      EngineConfig c = ec;
      if (k == 1) {
        c.mutable_offload()->set_optimizer_state(HOST);
        c.mutable_offload()->set_master_weights(HOST);
      }
      absl::StatusOr<RunResult> run = RunOnce(c, runtime->grid.get(), mc, views);
      bench::CheckOrExit(run.status(), names[k]);
      runs[k].push_back(*run);
    }
  }
  auto median = [&](int k, auto field) {
    std::vector<double> v;
    for (const RunResult& r : runs[k]) v.push_back(static_cast<double>(field(r)));
    return bench::Median(v);
  };
  const double tokens = static_cast<double>(batch) * seq;
  std::printf("GPT-2 %lld params (L=%d C=%d), batch %d x %d, bf16, ZeRO %d, dp 1, %s; medians of %zu runs\n\n",
              static_cast<long long>(psi), mc.n_layer, mc.n_embd, batch, seq, absl::GetFlag(FLAGS_stage),
              runtime->description.c_str(), runs[0].size());
  std::printf(
      "| offload | step ms | tokens/s | step vs DEVICE | device pool peak MiB | host MiB (masters+state, +staging) "
      "| final loss |\n|---|---|---|---|---|---|---|\n");
  const double base_step = median(0, [](const RunResult& r) { return r.step_s; });
  for (int k = 0; k < 2; ++k) {
    const double step = median(k, [](const RunResult& r) { return r.step_s; });
    std::printf("| %s | %.1f | %.0f | %.2f | %.1f | %.1f, %.1f | %.4f |\n", names[k], 1e3 * step, tokens / step,
                step / base_step,
                MiB(static_cast<int64_t>(median(k, [](const RunResult& r) { return r.device_peak; }))),
                k == 1 ? MiB(runs[k].back().host_state) : 0.0, k == 1 ? MiB(runs[k].back().host_bytes) : 0.0,
                runs[k].back().loss);
  }
  const double freed = median(0, [](const RunResult& r) { return r.device_peak; }) -
                       median(1, [](const RunResult& r) { return r.device_peak; });
  std::printf(
      "\n| device memory freed | measured MiB | theory MiB (masters + AdamW m, v: 12 B x padded params) |\n"
      "|---|---|---|\n| DEVICE - HOST | %.1f | %.1f |\n",
      freed / (1 << 20), MiB(runs[1].back().host_state));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return zeroshard::Run();
}

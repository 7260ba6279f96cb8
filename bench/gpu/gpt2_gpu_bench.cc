// GPT-2 124M training throughput on one GPU: bf16 compute, ZeRO stage 0,
// dp 1, engine.device.type CUDA, random tokens. A few warm-up steps, then
// --steps timed ones (each ends with a device synchronize); prints tokens/s
// (median step) and MFU against the H200's dense bf16 peak:
//
//   model FLOPs per token = 6·Ψ + 12·L·C·T   (Ψ without vocabulary padding;
//   the attention term as in the PaLM paper's appendix B and llm.c)
//
// and one machine-readable line that tools/gpu-check parses:
//
//   GPU_BENCH impl=zeroshard status=ok tokens_per_s=... mfu=... step_ms=... ...
//   GPU_BENCH impl=zeroshard status=skipped reason=<sentence>
//
// Without a usable GPU it prints the skip line and exits 0 before building
// anything. Run it under `mpirun -np 1`. --device=cpu with tiny shapes runs the
// same code on the CPU.
//
//   gpt2_gpu_bench [--batch=16] [--seq=1024] [--grad_accum=1] [--warmup=3] [--steps=10]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/common/bench_util.h"
#include "core/device.h"
#include "engine/engine.h"
#include "engine/engine_runtime.h"
#include "models/gpt2/gpt2.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime.h>
#endif

ABSL_FLAG(int, batch, 16, "sequences per optimizer step");
ABSL_FLAG(int, seq, 1024, "tokens per sequence (at most 1024, GPT-2's positions)");
ABSL_FLAG(int, grad_accum, 1, "micro-batches per step (each batch / grad_accum sequences)");
ABSL_FLAG(int, warmup, 3, "untimed steps first");
ABSL_FLAG(int, steps, 10, "timed steps; the median is reported");
ABSL_FLAG(int, n_layer, 12, "layers");
ABSL_FLAG(int, n_head, 12, "heads");
ABSL_FLAG(int, n_embd, 768, "channels");
ABSL_FLAG(int, vocab, 50257, "vocabulary");
ABSL_FLAG(int, vocab_multiple, 128, "pad the embedding rows to a multiple of this (llm.c: 50304)");
ABSL_FLAG(double, peak_flops, 989e12, "dense bf16 peak of the GPU for MFU (H100/H200 SXM: 989e12)");
ABSL_FLAG(std::string, device, "cuda", "cuda, or cpu to exercise the benchmark without a GPU (use tiny shapes)");

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

void Skip(const std::string& reason) {
  std::printf("gpt2_gpu_bench: skipped: %s\n", reason.c_str());
  std::printf("GPU_BENCH impl=zeroshard status=skipped reason=%s\n", reason.c_str());
  std::fflush(stdout);
}

void Fail(const std::string& what, const absl::Status& s) {
  const std::string reason = what + ": " + std::string(s.message());
  std::fprintf(stderr, "gpt2_gpu_bench: %s\n", reason.c_str());
  std::printf("GPU_BENCH impl=zeroshard status=failed reason=%s\n", reason.c_str());
  std::fflush(stdout);
  std::exit(1);
}

absl::Status SyncDevice() {
#ifdef ZEROSHARD_HAS_CUDA
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return absl::InternalError(std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(err));
#endif
  return absl::OkStatus();
}

int Run() {
  const bool cpu = absl::GetFlag(FLAGS_device) == "cpu";
  std::string reason;
  if (!cpu && !CudaAvailable(&reason)) {
    Skip(reason);
    return 0;
  }
  const int batch = absl::GetFlag(FLAGS_batch), seq = absl::GetFlag(FLAGS_seq);
  const int accum = std::max(1, absl::GetFlag(FLAGS_grad_accum));
  const int warmup = std::max(0, absl::GetFlag(FLAGS_warmup)), steps = std::max(1, absl::GetFlag(FLAGS_steps));
  if (batch < 1 || batch % accum != 0 || seq < 1 || seq > 1024) {
    std::fprintf(stderr, "gpt2_gpu_bench: need 1 <= --seq <= 1024 and --batch a multiple of --grad_accum\n");
    return 2;
  }
  const int micro = batch / accum;

  Gpt2Config mc;
  mc.n_layer = absl::GetFlag(FLAGS_n_layer);
  mc.n_head = absl::GetFlag(FLAGS_n_head);
  mc.n_embd = absl::GetFlag(FLAGS_n_embd);
  mc.vocab_size = absl::GetFlag(FLAGS_vocab);
  mc.seq_len = 1024;
  mc.vocab_multiple = std::max(1, absl::GetFlag(FLAGS_vocab_multiple));

  EngineConfig ec;
  ec.mutable_zero()->set_stage(0);
  ec.mutable_parallel()->set_dp(1);
  ec.mutable_precision()->set_compute_dtype(BF16);
  ec.mutable_device()->set_type(cpu ? DeviceConfig::CPU : DeviceConfig::CUDA);
  ec.set_gradient_accumulation_steps(accum);
  ec.mutable_optimizer()->set_lr(6e-4);

  CommOptions options;
  options.timeout = absl::Minutes(5);
  // Binds the GPU and builds the grid with the config's data backend, as the trainer does.
  auto runtime = CreateEngineRuntime(ec, options);
  if (!runtime.ok()) Fail("CreateEngineRuntime", runtime.status());
  auto model = BuildGpt2(mc);
  if (!model.ok()) Fail("BuildGpt2", model.status());
  const int64_t psi = (*model)->num_logical_params();
  auto engine = Engine::Create(ec, runtime->grid.get(), std::move(model).value());
  if (!engine.ok()) Fail("Engine::Create", engine.status());

  // Inputs and next-token targets of random sequences, one host buffer per
  // micro-batch (TrainStep takes host tensors).
  std::mt19937 rng(1234);
  std::vector<std::vector<int32_t>> inputs(accum), targets(accum);
  std::vector<Batch> views;
  for (int m = 0; m < accum; ++m) {
    std::vector<int32_t> tokens(static_cast<size_t>(micro) * (seq + 1));
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % mc.vocab_size);
    for (int b = 0; b < micro; ++b) {
      const int32_t* row = tokens.data() + static_cast<size_t>(b) * (seq + 1);
      inputs[m].insert(inputs[m].end(), row, row + seq);
      targets[m].insert(targets[m].end(), row + 1, row + seq + 1);
    }
    views.push_back(Gpt2Batch(TensorView{inputs[m].data(), DType::kI32, {micro, seq}, Device::kCpu},
                              TensorView{targets[m].data(), DType::kI32, {micro, seq}, Device::kCpu}));
  }

  std::vector<double> step_s;
  float first_loss = 0, last_loss = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    const auto t0 = Clock::now();
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    if (!r.ok()) Fail("TrainStep", r.status());
    const absl::Status sync = cpu ? absl::OkStatus() : SyncDevice();
    if (!sync.ok()) Fail("after TrainStep", sync);
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s == 0) first_loss = r->loss;
    last_loss = r->loss;
    if (!std::isfinite(r->loss)) Fail("TrainStep", absl::InternalError("non-finite loss"));
    if (s >= warmup) step_s.push_back(sec);
  }

  const double tokens = static_cast<double>(batch) * seq;
  const double step = bench::Median(step_s);
  const double flops_per_token = 6.0 * static_cast<double>(psi) + 12.0 * mc.n_layer * mc.n_embd * seq;
  const double tokens_per_s = tokens / step;
  const double mfu = tokens_per_s * flops_per_token / absl::GetFlag(FLAGS_peak_flops);
  std::printf("GPT-2 %lld params (L=%d C=%d NH=%d V=%d padded to %lld), batch %d x %d tokens (%d micro-batches),"
              " bf16, ZeRO 0, %s\n",
              static_cast<long long>(psi), mc.n_layer, mc.n_embd, mc.n_head, mc.vocab_size,
              static_cast<long long>(mc.padded_vocab_size()), batch, seq, accum, runtime->description.c_str());
  std::printf("  median step %.2f ms over %d steps (after %d warm-up), min %.2f ms\n", 1e3 * step, steps, warmup,
              1e3 * *std::min_element(step_s.begin(), step_s.end()));
  std::printf("  %.0f tokens/s, %.3g model FLOPs per token, MFU %.1f%% of %.0f TFLOP/s\n", tokens_per_s,
              flops_per_token, 100 * mfu, absl::GetFlag(FLAGS_peak_flops) / 1e12);
  std::printf("  loss %.4f at step 1, %.4f at step %d (ln V = %.4f)\n", first_loss, last_loss, warmup + steps,
              std::log(static_cast<double>(mc.vocab_size)));
  std::printf("GPU_BENCH impl=zeroshard status=ok tokens_per_s=%.1f mfu=%.4f step_ms=%.3f batch=%d seq=%d params=%lld"
              " flops_per_token=%.6g loss=%.4f\n",
              tokens_per_s, mfu, 1e3 * step, batch, seq, static_cast<long long>(psi), flops_per_token, last_loss);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return zeroshard::Run();
}

#include "kernels/context.h"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include <cblas.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/host_memset_threads.h"
#include "core/local_ranks.h"
#include "kernels/cpu/vector_isa.h"

namespace zeroshard::kernels {
namespace {

// 0 until configured; then the count applied to OpenBLAS too.
std::atomic<int> g_cpu_threads{0};

}  // namespace

int DefaultCpuThreads() {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cores < 1) cores = 1;
  // A launcher that binds ranks (mpirun --bind-to core, srun --cpu-bind)
  // already gave this process its share: use it as is.
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    const int allowed = CPU_COUNT(&mask);
    if (allowed >= 1 && allowed < cores) return allowed;
  }
  int n = cores / LocalRanksFromEnvironment().value_or(1);
  return n < 1 ? 1 : n;
}

int CpuThreadsOrDefault(int requested) { return requested > 0 ? requested : DefaultCpuThreads(); }

void SetCpuThreads(int n) {
  if (n < 1) n = 1;
  g_cpu_threads.store(n);
  SetHostMemsetThreads(n);
  // GEMM threads over fixed tiles, each one single-threaded OpenBLAS call.
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

int CpuThreads() {
  int n = g_cpu_threads.load();
  if (n == 0) {
    SetCpuThreads(DefaultCpuThreads());
    n = g_cpu_threads.load();
  }
  return n;
}

int LoopThreads(const KernelContext& ctx) { return ctx.num_threads > 0 ? ctx.num_threads : CpuThreads(); }

CpuBlasInfo DescribeCpuBlas() {
  CpuBlasInfo info;
  // openblas_get_config() starts with "OpenBLAS <version>", then build options.
  const std::vector<std::string> words = absl::StrSplit(openblas_get_config(), ' ', absl::SkipEmpty());
  info.library = words.size() >= 2 ? absl::StrCat(words[0], " ", words[1]) : std::string(openblas_get_config());
  info.core = openblas_get_corename();
  info.threads = CpuThreads();
  info.vector_isa = cpu::VectorIsaName(cpu::ActiveVectorIsa());
  return info;
}

absl::Status ConfigureCpuVectorIsa() {
  absl::StatusOr<cpu::VectorIsa> isa = cpu::VectorIsaFromEnvironment();
  if (!isa.ok()) return isa.status();
  return cpu::SetActiveVectorIsa(*isa);
}

std::string CpuBlasSummary() {
  const CpuBlasInfo info = DescribeCpuBlas();
  return absl::StrCat(info.library, ", ", info.core, " kernels, ", info.threads, info.threads == 1 ? " thread" : " threads",
                      ", ", info.vector_isa, " loops");
}

}  // namespace zeroshard::kernels

#include "kernels/context.h"

#include <cblas.h>
#include <sched.h>

#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernels/cpu/vector_isa.h"

namespace zeroshard::kernels {
namespace {

TEST(Context, DefaultThreadsDivideCoresByLocalRanks) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  if (CPU_COUNT(&mask) < cores) GTEST_SKIP() << "process is bound to " << CPU_COUNT(&mask) << " of " << cores << " CPUs";
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  unsetenv("MPI_LOCALNRANKS");
  EXPECT_EQ(DefaultCpuThreads(), cores);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  EXPECT_EQ(DefaultCpuThreads(), std::max(1, cores / 2));
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1000", 1);  // more ranks than cores: still one thread
  EXPECT_EQ(DefaultCpuThreads(), 1);
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  setenv("MPI_LOCALNRANKS", "1000", 1);
  EXPECT_EQ(DefaultCpuThreads(), 1);
  unsetenv("MPI_LOCALNRANKS");
}

TEST(Context, BoundProcessUsesItsCpus) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  if (CPU_COUNT(&saved) < 2) GTEST_SKIP() << "needs a process allowed on >= 2 CPUs to bind it to 1";
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &saved)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
  EXPECT_EQ(DefaultCpuThreads(), 1);
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
}

// The kernels thread themselves; OpenBLAS stays at one thread whatever the
// count (kernels/cpu/gemm_tiles.h).
TEST(Context, SetCpuThreadsClampsAndKeepsOpenBlasSingleThreaded) {
  SetCpuThreads(1);
  EXPECT_EQ(CpuThreads(), 1);
  EXPECT_EQ(openblas_get_num_threads(), 1);
  SetCpuThreads(0);
  EXPECT_EQ(CpuThreads(), 1);
  SetCpuThreads(2);
  EXPECT_EQ(CpuThreads(), 2);
  EXPECT_EQ(openblas_get_num_threads(), 1);
  EXPECT_EQ(LoopThreads(KernelContext::Cpu()), 2);
  EXPECT_EQ(LoopThreads(KernelContext::Cpu(5)), 5);
}

TEST(Context, CpuThreadsOrDefaultKeepsARequestAndDefaultsTheRest) {
  EXPECT_EQ(CpuThreadsOrDefault(3), 3);
  EXPECT_EQ(CpuThreadsOrDefault(0), DefaultCpuThreads());
  EXPECT_EQ(CpuThreadsOrDefault(-1), DefaultCpuThreads());
}

TEST(Context, DescribeCpuBlasNamesLibraryCoreAndThreads) {
  SetCpuThreads(3);
  const CpuBlasInfo info = DescribeCpuBlas();
  EXPECT_EQ(info.library.rfind("OpenBLAS ", 0), 0u) << info.library;
  EXPECT_EQ(info.core, std::string(openblas_get_corename()));
  EXPECT_FALSE(info.core.empty());
  EXPECT_EQ(info.threads, 3);
  EXPECT_EQ(info.vector_isa, cpu::VectorIsaName(cpu::ActiveVectorIsa()));
  EXPECT_EQ(CpuBlasSummary(), info.library + ", " + info.core + " kernels, 3 threads, " + info.vector_isa + " loops");
  SetCpuThreads(1);
  EXPECT_EQ(CpuBlasSummary(), info.library + ", " + info.core + " kernels, 1 thread, " + info.vector_isa + " loops");
}

TEST(Context, ConfigureCpuVectorIsaAppliesTheEnvironment) {
  ASSERT_EQ(setenv(cpu::kVectorIsaEnv, "baseline", 1), 0);
  ASSERT_TRUE(ConfigureCpuVectorIsa().ok());
  EXPECT_EQ(DescribeCpuBlas().vector_isa, "baseline");
  ASSERT_EQ(setenv(cpu::kVectorIsaEnv, "avx1024", 1), 0);
  const absl::Status bad = ConfigureCpuVectorIsa();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "ZEROSHARD_CPU_ISA=avx1024: expected one of baseline, avx2, avx512 (or unset for the widest)");
  EXPECT_EQ(DescribeCpuBlas().vector_isa, "baseline");  // unchanged by the failure
  ASSERT_EQ(unsetenv(cpu::kVectorIsaEnv), 0);
  ASSERT_TRUE(ConfigureCpuVectorIsa().ok());
  EXPECT_EQ(DescribeCpuBlas().vector_isa, cpu::VectorIsaName(cpu::BestVectorIsa()));
}

// tools/test --determinism selects kernels with OPENBLAS_CORETYPE: the tier
// is only worth its name if OpenBLAS really runs the kernels asked for.
TEST(Context, OpenBlasRunsTheRequestedCoreType) {
  const char* requested = std::getenv("OPENBLAS_CORETYPE");
  if (requested == nullptr || *requested == '\0') GTEST_SKIP() << "OPENBLAS_CORETYPE is not set";
  std::cout << "[ cpu      ] " << CpuBlasSummary() << "\n";
  EXPECT_TRUE(absl::EqualsIgnoreCase(DescribeCpuBlas().core, requested))
      << "OPENBLAS_CORETYPE=" << requested << " but OpenBLAS runs " << DescribeCpuBlas().core;
}

}  // namespace
}  // namespace zeroshard::kernels

#include "kernels/cpu/vector_isa.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace zeroshard::kernels::cpu {

namespace {

// -1 until first asked; then a VectorIsa.
std::atomic<int>& ActiveSlot() {
  static std::atomic<int> slot{-1};
  return slot;
}

absl::Status Lacking(absl::string_view what, VectorIsa isa) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": this CPU lacks ", VectorIsaName(isa), "; it runs up to ",
                                                 VectorIsaName(BestVectorIsa())));
}

}  // namespace

const char* VectorIsaName(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kBaseline:
      return "baseline";
    case VectorIsa::kAvx2:
      return "avx2";
    case VectorIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

bool CpuSupports(VectorIsa isa) {
  // __builtin_cpu_supports reads CPUID and, for AVX and AVX-512, whether the
  // OS saves the wider registers (XGETBV).
  switch (isa) {
    case VectorIsa::kBaseline:
      return true;
    case VectorIsa::kAvx2:
      return __builtin_cpu_supports("avx2");
    case VectorIsa::kAvx512:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

VectorIsa BestVectorIsa() {
  VectorIsa best = VectorIsa::kBaseline;
  for (VectorIsa isa : kVectorIsas) {
    if (CpuSupports(isa)) best = isa;
  }
  return best;
}

absl::StatusOr<VectorIsa> VectorIsaFromEnvironment() {
  const char* value = std::getenv(kVectorIsaEnv);
  if (value == nullptr || *value == '\0') return BestVectorIsa();
  for (VectorIsa isa : kVectorIsas) {
    if (std::string_view(value) != VectorIsaName(isa)) continue;
    if (!CpuSupports(isa)) return Lacking(absl::StrCat(kVectorIsaEnv, "=", value), isa);
    return isa;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(kVectorIsaEnv, "=", value, ": expected one of baseline, avx2, avx512 (or unset for the widest)"));
}

VectorIsa ActiveVectorIsa() {
  int isa = ActiveSlot().load(std::memory_order_relaxed);
  if (isa < 0) {
    const absl::StatusOr<VectorIsa> chosen = VectorIsaFromEnvironment();
    int expected = -1;
    ActiveSlot().compare_exchange_strong(expected, static_cast<int>(chosen.ok() ? *chosen : BestVectorIsa()));
    isa = ActiveSlot().load(std::memory_order_relaxed);
  }
  return static_cast<VectorIsa>(isa);
}

absl::Status SetActiveVectorIsa(VectorIsa isa) {
  if (!CpuSupports(isa)) return Lacking(absl::StrCat("vector ISA ", VectorIsaName(isa)), isa);
  ActiveSlot().store(static_cast<int>(isa), std::memory_order_relaxed);
  return absl::OkStatus();
}

ScopedVectorIsa::ScopedVectorIsa(VectorIsa isa) : saved_(ActiveVectorIsa()) {
  ActiveSlot().store(static_cast<int>(CpuSupports(isa) ? isa : VectorIsa::kBaseline), std::memory_order_relaxed);
}

ScopedVectorIsa::~ScopedVectorIsa() { ActiveSlot().store(static_cast<int>(saved_), std::memory_order_relaxed); }

}  // namespace zeroshard::kernels::cpu

// The x86-64 vector extension the element-wise CPU loops run at, chosen at
// run time. Each loop body is compiled once per ISA from the same source;
// with no multiply-add contraction (-ffp-contract=off, kernels/cpu/BUILD) and
// no reassociation, every lane performs the scalar operations in the scalar
// order, so the results are bitwise the same at every ISA and only the speed
// differs. vector_isa_test checks that on each ISA the CPU has.
#ifndef ZEROSHARD_KERNELS_CPU_VECTOR_ISA_H_
#define ZEROSHARD_KERNELS_CPU_VECTOR_ISA_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/dtype.h"  // ZS_FORCE_INLINE

namespace zeroshard::kernels::cpu {

// Ordered: each one's instructions include the previous one's.
enum class VectorIsa { kBaseline, kAvx2, kAvx512 };
inline constexpr VectorIsa kVectorIsas[] = {VectorIsa::kBaseline, VectorIsa::kAvx2, VectorIsa::kAvx512};

// "baseline" (x86-64's SSE2), "avx2", "avx512".
const char* VectorIsaName(VectorIsa isa);

// Whether this CPU (and the OS, for the wider registers) runs `isa`.
bool CpuSupports(VectorIsa isa);

// The widest ISA CpuSupports().
VectorIsa BestVectorIsa();

// Environment variable that caps the ISA, e.g. to time the loops at each one.
inline constexpr char kVectorIsaEnv[] = "ZEROSHARD_CPU_ISA";

// The ISA named by ZEROSHARD_CPU_ISA, else BestVectorIsa(). An error names
// the value if it is not one of VectorIsaName()'s words or the CPU lacks it.
absl::StatusOr<VectorIsa> VectorIsaFromEnvironment();

// The ISA the loops run at: VectorIsaFromEnvironment() when first asked
// (BestVectorIsa() if that fails; engine start-up reports the failure), or
// what SetActiveVectorIsa() chose since.
VectorIsa ActiveVectorIsa();

// kInvalidArgument, naming the ISA, if the CPU lacks it.
absl::Status SetActiveVectorIsa(VectorIsa isa);

// Runs the loops at one ISA for a scope (tests, benchmarks). `isa` must be
// supported.
class ScopedVectorIsa {
 public:
  explicit ScopedVectorIsa(VectorIsa isa);
  ~ScopedVectorIsa();
  ScopedVectorIsa(const ScopedVectorIsa&) = delete;
  ScopedVectorIsa& operator=(const ScopedVectorIsa&) = delete;

 private:
  VectorIsa saved_;
};

namespace vector_isa_internal {

template <typename Body, typename... Args>
__attribute__((target("avx2"))) void RunAvx2(Args... args) {
  Body::Run(args...);
}

template <typename Body, typename... Args>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void RunAvx512(Args... args) {
  Body::Run(args...);
}

}  // namespace vector_isa_internal

// Calls Body::Run(args...) compiled for ActiveVectorIsa(). GCC compiles a
// function at its caller's ISA only where it inlines it, so Body::Run and
// every function it calls per element are ZS_FORCE_INLINE (core/dtype.h);
// one it does not inline would run its baseline code, still bitwise equal.
template <typename Body, typename... Args>
void RunVectorized(Args... args) {
  switch (ActiveVectorIsa()) {
    case VectorIsa::kAvx512:
      vector_isa_internal::RunAvx512<Body>(args...);
      return;
    case VectorIsa::kAvx2:
      vector_isa_internal::RunAvx2<Body>(args...);
      return;
    case VectorIsa::kBaseline:
      break;
  }
  Body::Run(args...);
}

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_VECTOR_ISA_H_

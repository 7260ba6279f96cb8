// cuBLASLt matmul with a fused epilogue for the Linear layer (bias, or GELU
// with the pre-activation written to the auxiliary matrix).
//
// Row-major out (N,OC) = inp (N,C) · W (C,OC) is run as column-major
// out^T (OC,N) = W^T (OC,C) · inp^T (C,N), as gemm.cu does: a row-major
// matrix read column-major is its transpose, so no operand is transposed.
// The bias then runs along D's rows (length OC), which is what cuBLASLt's
// bias epilogue broadcasts over D's columns (the N rows of `out`).
//
// GELU: cuBLASLt's GELU epilogue is the tanh approximation,
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the same formula as
// GeluTanh in kernels/pointwise_math.h; its device implementation (tanh
// evaluation, and GELU applied to the unrounded f32 pre-activation rather
// than the stored one) differs, so results agree to rounding, not bitwise.
#include <cublasLt.h>

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels::cuda {
namespace {

// core/status_macros.h is not among the headers nvcc sees here.
#define ZS_LT_RETURN_IF_ERROR(expr)                \
  do {                                             \
    absl::Status zs_lt_status = (expr);            \
    if (!zs_lt_status.ok()) return zs_lt_status;   \
  } while (0)

absl::Status LtStatus(const char* what, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("LinearLt: ", what, ": ", cublasGetStatusName(s), ": ", cublasGetStatusString(s)));
}

// Owns one cuBLASLt descriptor; destroyed on every return path.
template <typename H, cublasStatus_t (*Destroy)(H)>
class Owned {
 public:
  Owned() = default;
  ~Owned() {
    if (h_ != nullptr) Destroy(h_);
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  H* out() { return &h_; }
  H get() const { return h_; }

 private:
  H h_ = nullptr;
};

using MatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

template <typename V>
absl::Status SetDesc(const MatmulDesc& desc, cublasLtMatmulDescAttributes_t attr, const V& value,
                     const char* name) {
  return LtStatus(name, cublasLtMatmulDescSetAttribute(desc.get(), attr, &value, sizeof(value)));
}

template <typename V>
absl::Status SetPref(const Preference& pref, cublasLtMatmulPreferenceAttributes_t attr, const V& value,
                     const char* name) {
  return LtStatus(name, cublasLtMatmulPreferenceSetAttribute(pref.get(), attr, &value, sizeof(value)));
}

// Largest power of two <= 256 dividing the address: the heuristic's
// default assumes 256-byte aligned operands, and a view into a buffer may
// be less aligned than that.
uint32_t AlignmentOf(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

}  // namespace

absl::Status LinearLt(const KernelContext& ctx, void* out, void* pre, const void* inp, const void* weight,
                      const void* bias, int64_t rows, int64_t in_features, int64_t out_features, DType dtype,
                      bool* fused) {
  *fused = false;
  if (ctx.cublaslt_handle == nullptr) return absl::OkStatus();
  if (dtype != DType::kF32 && dtype != DType::kBF16) return absl::OkStatus();
  const int64_t n = rows, c = in_features, oc = out_features;
  // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: a multiple of 8, >= D's rows (OC).
  if (pre != nullptr && oc % 8 != 0) return absl::OkStatus();
  // The heuristic's alignment preferences cover A, B, C and D only, and
  // epilogue kernels may assume 16-byte bias and aux vectors (a misaligned
  // one faults, losing the context): those take the unfused path.
  if (bias != nullptr && AlignmentOf(bias) < 16) return absl::OkStatus();
  if (pre != nullptr && AlignmentOf(pre) < 16) return absl::OkStatus();

  cublasLtHandle_t handle = static_cast<cublasLtHandle_t>(ctx.cublaslt_handle);
  const cudaDataType_t type = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (pre != nullptr) {
    epilogue = bias != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  } else if (bias != nullptr) {
    epilogue = CUBLASLT_EPILOGUE_BIAS;
  }

  // CUBLAS_COMPUTE_32F (not _FAST_TF32): f32 stays full precision.
  MatmulDesc desc;
  ZS_LT_RETURN_IF_ERROR(LtStatus("cublasLtMatmulDescCreate",
                                 cublasLtMatmulDescCreate(desc.out(), CUBLAS_COMPUTE_32F, CUDA_R_32F)));
  ZS_LT_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue,
                                "cublasLtMatmulDescSetAttribute(EPILOGUE)"));
  // Bias and aux default to D's type (dtype), which is what they hold; both
  // are 16-byte aligned (checked above).
  if (bias != nullptr) {
    ZS_LT_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias,
                                  "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"));
  }
  if (pre != nullptr) {
    const int64_t aux_ld = oc;  // pre is (N,OC) row-major: D's layout
    ZS_LT_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pre,
                                  "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)"));
    ZS_LT_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld,
                                  "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)"));
  }

  // Column-major views: A = W^T (OC,C) ld OC, B = inp^T (C,N) ld C,
  // C = D = out^T (OC,N) ld OC.
  Layout a, b, d;
  ZS_LT_RETURN_IF_ERROR(LtStatus("cublasLtMatrixLayoutCreate(A)",
                                 cublasLtMatrixLayoutCreate(a.out(), type, static_cast<uint64_t>(oc),
                                                            static_cast<uint64_t>(c), oc)));
  ZS_LT_RETURN_IF_ERROR(LtStatus("cublasLtMatrixLayoutCreate(B)",
                                 cublasLtMatrixLayoutCreate(b.out(), type, static_cast<uint64_t>(c),
                                                            static_cast<uint64_t>(n), c)));
  ZS_LT_RETURN_IF_ERROR(LtStatus("cublasLtMatrixLayoutCreate(D)",
                                 cublasLtMatrixLayoutCreate(d.out(), type, static_cast<uint64_t>(oc),
                                                            static_cast<uint64_t>(n), oc)));

  void* workspace = ctx.cuda_workspace;
  const uint64_t workspace_bytes = workspace == nullptr ? 0 : ctx.cuda_workspace_bytes;
  Preference pref;
  ZS_LT_RETURN_IF_ERROR(LtStatus("cublasLtMatmulPreferenceCreate", cublasLtMatmulPreferenceCreate(pref.out())));
  ZS_LT_RETURN_IF_ERROR(SetPref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes,
                                "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)"));
  const uint32_t align_a = AlignmentOf(weight), align_b = AlignmentOf(inp), align_d = AlignmentOf(out);
  ZS_LT_RETURN_IF_ERROR(SetPref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a,
                                "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A_BYTES)"));
  ZS_LT_RETURN_IF_ERROR(SetPref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b,
                                "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B_BYTES)"));
  ZS_LT_RETURN_IF_ERROR(SetPref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d,
                                "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_C_BYTES)"));
  ZS_LT_RETURN_IF_ERROR(SetPref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d,
                                "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_D_BYTES)"));

  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(handle, desc.get(), a.get(), b.get(), d.get(), d.get(), pref.get(), 1, &result,
                                     &found);
  // NOT_SUPPORTED: no heuristic for this configuration. Either way no
  // algorithm, a capability limit: the caller runs the unfused kernels.
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED) return absl::OkStatus();
  ZS_LT_RETURN_IF_ERROR(LtStatus("cublasLtMatmulAlgoGetHeuristic", hs));
  if (found == 0 || result.state != CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  if (result.workspaceSize > workspace_bytes) {
    return absl::InternalError(absl::StrCat("LinearLt: cublasLtMatmulAlgoGetHeuristic: the algorithm needs ",
                                            result.workspaceSize, " bytes of workspace, more than the ",
                                            workspace_bytes, " allowed"));
  }

  const float alpha = 1.0f, beta = 0.0f;  // beta = 0: C (= out) is not read
  ZS_LT_RETURN_IF_ERROR(LtStatus("cublasLtMatmul",
                                 cublasLtMatmul(handle, desc.get(), &alpha, weight, a.get(), inp, b.get(), &beta, out,
                                                d.get(), out, d.get(), &result.algo, workspace, workspace_bytes,
                                                StreamOf(ctx))));
  *fused = true;
  return absl::OkStatus();
}

#undef ZS_LT_RETURN_IF_ERROR

}  // namespace zeroshard::kernels::cuda

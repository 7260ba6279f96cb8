#include "checkpoint/diff.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/manifest.h"
#include "core/status_macros.h"

namespace zeroshard {

void DiffValues(const float* a, const float* b, int64_t n, TensorDiff* out) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    double abs_diff = 0, rel = 0;
    if (std::isnan(x) || std::isnan(y)) {
      abs_diff = rel = (std::isnan(x) && std::isnan(y)) ? 0 : kInf;
    } else if (std::isinf(x) || std::isinf(y)) {
      abs_diff = rel = x == y ? 0 : kInf;
    } else {
      abs_diff = std::fabs(x - y);
      const double scale = std::max(std::fabs(x), std::fabs(y));
      rel = scale > 0 ? abs_diff / scale : 0;
    }
    out->max_abs = std::max(out->max_abs, abs_diff);
    out->max_rel = std::max(out->max_rel, rel);
  }
}

absl::StatusOr<std::vector<TensorDiff>> DiffCheckpoints(const CheckpointReader& a, const CheckpointReader& b) {
  const CheckpointManifest& ma = a.manifest();
  const CheckpointManifest& mb = b.manifest();
  if (ma.units_size() != mb.units_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoints have ", ma.units_size(), " and ", mb.units_size(), " units"));
  }
  for (int u = 0; u < ma.units_size(); ++u) {
    const CheckpointUnit& ua = ma.units(u);
    const CheckpointUnit& ub = mb.units(u);
    if (ua.params_size() != ub.params_size()) {
      return absl::FailedPreconditionError(absl::StrCat("unit ", u, " has ", ua.params_size(), " and ",
                                                        ub.params_size(), " parameters"));
    }
    for (int p = 0; p < ua.params_size(); ++p) {
      // Whole, unpadded shapes (what ReadParam returns): under tp the
      // manifest's `shape` is one rank's slice, which differs between tp
      // sizes although the tensors are the same.
      const CheckpointParam& pa = ua.params(p);
      const CheckpointParam& pb = ub.params(p);
      const std::vector<int64_t> sa = ParamSpecOf(pa).logical(), sb = ParamSpecOf(pb).logical();
      if (pa.name() != pb.name() || sa != sb) {
        return absl::FailedPreconditionError(absl::StrCat(
            "unit ", u, " parameter ", p, " is '", pa.name(), "' [", absl::StrJoin(sa, ", "), "] in the first "
            "and '", pb.name(), "' [", absl::StrJoin(sb, ", "), "] in the second checkpoint"));
      }
    }
  }
  std::vector<TensorDiff> diffs;
  for (const std::string& kind : ma.kinds()) {
    if (!b.HasKind(kind)) continue;
    for (int u = 0; u < ma.units_size(); ++u) {
      for (int p = 0; p < ma.units(u).params_size(); ++p) {
        ASSIGN_OR_RETURN(std::vector<float> va, a.ReadParam(u, p, kind));
        ASSIGN_OR_RETURN(std::vector<float> vb, b.ReadParam(u, p, kind));
        TensorDiff d;
        d.name = ma.units(u).params(p).name();
        d.kind = kind;
        d.numel = static_cast<int64_t>(va.size());
        DiffValues(va.data(), vb.data(), d.numel, &d);
        diffs.push_back(std::move(d));
      }
    }
  }
  return diffs;
}

}  // namespace zeroshard

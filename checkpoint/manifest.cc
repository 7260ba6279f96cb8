#include "checkpoint/manifest.h"

#include <algorithm>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/crc32c.h"
#include "core/status_macros.h"
#include "nn/param_spec.h"
#include "sharding/optimizer_registry.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace zeroshard {
namespace {

namespace pb = google::protobuf;

constexpr char kCrcPrefix[] = "# crc32c=";

class FirstError : public pb::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) error_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  void AddWarning(int, int, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

absl::Status Invalid(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("checkpoint manifest: ", what));
}

bool SafeFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

ParamSpec ParamSpecOf(const CheckpointParam& p) {
  ParamSpec spec;
  spec.name = p.name();
  if (p.split_dim() < 0) {
    spec.shape.assign(p.shape().begin(), p.shape().end());
  } else {
    spec.shape.assign(p.global_shape().begin(), p.global_shape().end());
    spec.partition = Partition::Split(p.split_dim(), p.split_blocks());
  }
  spec.logical_shape.assign(p.logical_shape().begin(), p.logical_shape().end());
  spec.pads_split_dim = p.pads_split_dim();
  return spec;
}

namespace {

absl::Status ValidateUnit(const CheckpointManifest& m, int u) {
  const CheckpointUnit& unit = m.units(u);
  if (unit.index() != u) return Invalid(absl::StrCat("units[", u, "] has index ", unit.index(), ", expected ", u));
  int64_t at = 0;
  for (int p = 0; p < unit.params_size(); ++p) {
    const CheckpointParam& param = unit.params(p);
    int64_t numel = 1;
    for (int64_t d : param.shape()) {
      if (d < 0 || (d > 0 && numel > (int64_t{1} << 50) / d)) {
        return Invalid(absl::StrCat("parameter '", param.name(), "' has an invalid shape"));
      }
      numel *= d;
    }
    if (absl::Status s = ValidateLogicalShape(ParamSpecOf(param)); !s.ok()) {
      return Invalid(absl::StrCat("unit ", u, ": ", s.message()));
    }
    if (param.split_dim() >= 0) {
      absl::StatusOr<std::vector<int64_t>> local = LocalShape(ParamSpecOf(param), m.topology().tp());
      if (!local.ok() || !std::equal(local->begin(), local->end(), param.shape().begin(), param.shape().end())) {
        return Invalid(absl::StrCat("parameter '", param.name(), "' of unit ", u, " is split along dim ",
                                    param.split_dim(), " of [", absl::StrJoin(param.global_shape(), ", "),
                                    "] into ", param.split_blocks(), " block(s) over tp ", m.topology().tp(),
                                    ", which does not give its shape [", absl::StrJoin(param.shape(), ", "), "]"));
      }
    }
    if (param.offset() != at || param.numel() != numel) {
      return Invalid(absl::StrCat("parameter '", param.name(), "' of unit ", u, " has offset ", param.offset(),
                                  " and numel ", param.numel(), ", expected offset ", at, " and numel ", numel,
                                  " (parameters are laid end to end)"));
    }
    at += numel;
    if (at > (int64_t{1} << 50)) return Invalid(absl::StrCat("unit ", u, " has more than 2^50 elements"));
  }
  if (unit.numel() != at) {
    return Invalid(absl::StrCat("unit ", u, " has numel ", unit.numel(), ", but its parameters sum to ", at));
  }
  return absl::OkStatus();
}

absl::Status ValidateFile(const CheckpointManifest& m, int r, const std::vector<FlatParamLayout>& layouts) {
  const CheckpointFile& f = m.files(r);
  const int dp = m.topology().dp(), tp = m.topology().tp();
  if (f.tp_rank() != r % tp || f.dp_rank() != (r / tp) % dp || f.pp_rank() != r / (tp * dp)) {
    return Invalid(absl::StrCat("files[", r, "] has (pp_rank, dp_rank, tp_rank) (", f.pp_rank(), ", ", f.dp_rank(),
                                ", ", f.tp_rank(), "), expected (", r / (tp * dp), ", ", (r / tp) % dp, ", ", r % tp,
                                ")"));
  }
  if (!SafeFileName(f.path())) return Invalid(absl::StrCat("files[", r, "] path '", f.path(), "' is not a plain file name"));
  // The file holds the units of its pipeline stage.
  auto in_file = [&](const FlatParamLayout& l) {
    return l.numel() > 0 && m.units(l.unit_index()).stage() == f.pp_rank();
  };
  std::vector<std::string> expected;
  for (const FlatParamLayout& l : layouts) {
    if (!in_file(l)) continue;
    for (const std::string& kind : m.kinds()) expected.push_back(ShardTensorName(l.unit_index(), kind));
  }
  if (f.tensors_size() != static_cast<int>(expected.size())) {
    return Invalid(absl::StrCat("file '", f.path(), "' lists ", f.tensors_size(), " tensors, expected ",
                                expected.size(), " (", m.kinds_size(), " kinds for each non-empty unit)"));
  }
  int64_t at = 0;
  size_t t = 0;
  for (const FlatParamLayout& l : layouts) {
    if (!in_file(l)) continue;
    for (int k = 0; k < m.kinds_size(); ++k, ++t) {
      const CheckpointTensor& tensor = f.tensors(static_cast<int>(t));
      if (tensor.name() != expected[t] || tensor.dtype() != "F32" || tensor.shape_size() != 1 ||
          tensor.shape(0) != l.shard_numel() || tensor.data_begin() != at ||
          tensor.data_end() != at + 4 * l.shard_numel()) {
        return Invalid(absl::StrCat("file '", f.path(), "' tensor ", t, " is '", tensor.name(), "' ", tensor.dtype(),
                                    "[", absl::StrJoin(tensor.shape(), ","), "] at [", tensor.data_begin(), ", ",
                                    tensor.data_end(), "), expected '", expected[t], "' F32[", l.shard_numel(),
                                    "] at [", at, ", ", at + 4 * l.shard_numel(), ")"));
      }
      at = tensor.data_end();
    }
  }
  if (f.header_bytes() < 2 || f.size_bytes() != 8 + f.header_bytes() + at) {
    return Invalid(absl::StrCat("file '", f.path(), "' has size_bytes ", f.size_bytes(), " but 8 + header_bytes ",
                                f.header_bytes(), " + data ", at, " = ", 8 + f.header_bytes() + at));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShardFileName(int pp_rank, int dp_rank, int tp_rank) {
  return absl::StrFormat("shard_pp%03d_dp%05d_tp%03d.safetensors", pp_rank, dp_rank, tp_rank);
}

std::string ShardTensorName(int unit, absl::string_view kind) { return absl::StrCat("unit.", unit, ".", kind); }

std::string EncodeManifest(const CheckpointManifest& manifest) {
  std::string text;
  pb::TextFormat::PrintToString(manifest, &text);
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  return absl::StrCat(text, kCrcPrefix, absl::StrFormat("%08x", Crc32c(text)), "\n");
}

absl::StatusOr<CheckpointManifest> DecodeManifest(absl::string_view text, absl::string_view source) {
  // The checksum line: the last line, exactly "# crc32c=xxxxxxxx\n".
  const size_t line_len = sizeof(kCrcPrefix) - 1 + 8 + 1;
  if (text.size() < line_len || text.back() != '\n') {
    return absl::DataLossError(absl::StrCat(source, ": does not end with a '", kCrcPrefix,
                                            "XXXXXXXX' line (truncated or not a manifest)"));
  }
  const absl::string_view body = text.substr(0, text.size() - line_len);
  const absl::string_view line = text.substr(text.size() - line_len);
  uint32_t stored = 0;
  const absl::string_view hex = line.substr(sizeof(kCrcPrefix) - 1, 8);
  bool hex_ok = absl::StartsWith(line, kCrcPrefix) && (body.empty() || body.back() == '\n');
  for (char c : hex) hex_ok &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  if (!hex_ok || !absl::SimpleHexAtoi(hex, &stored)) {
    return absl::DataLossError(absl::StrCat(source, ": last line '", absl::CEscape(line.substr(0, line_len - 1)),
                                            "' is not '", kCrcPrefix, "XXXXXXXX'"));
  }
  const uint32_t actual = Crc32c(body);
  if (actual != stored) {
    return absl::DataLossError(absl::StrFormat("%s: checksum mismatch: the file says crc32c=%08x, its contents "
                                               "have %08x (corrupt or edited)",
                                               std::string(source), stored, actual));
  }
  CheckpointManifest manifest;
  pb::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(body), &manifest)) {
    return absl::DataLossError(absl::StrCat(source, ":", errors.error()));
  }
  if (manifest.format_version() < kOldestManifestFormatVersion ||
      manifest.format_version() > kManifestFormatVersion) {
    return absl::UnimplementedError(absl::StrCat(source, ": format_version ", manifest.format_version(),
                                                 " is not supported; this build reads versions ",
                                                 kOldestManifestFormatVersion, " to ", kManifestFormatVersion));
  }
  absl::Status valid = ValidateManifest(manifest);
  if (!valid.ok()) return absl::Status(valid.code(), absl::StrCat(source, ": ", valid.message()));
  return manifest;
}

absl::StatusOr<std::vector<FlatParamLayout>> LayoutsFromManifest(const CheckpointManifest& manifest, int dp) {
  std::vector<FlatParamLayout> layouts;
  for (const CheckpointUnit& unit : manifest.units()) {
    std::vector<FlatParamDecl> decls;
    for (const CheckpointParam& p : unit.params()) {
      decls.push_back({p.name(), std::vector<int64_t>(p.shape().begin(), p.shape().end())});
    }
    absl::StatusOr<FlatParamLayout> layout =
        FlatParamLayout::Create(unit.name(), unit.index(), std::move(decls), dp, manifest.topology().alignment());
    if (!layout.ok()) {
      return absl::DataLossError(absl::StrCat("checkpoint manifest: unit ", unit.index(), " '", unit.name(),
                                              "': ", layout.status().message()));
    }
    layouts.push_back(std::move(*layout));
  }
  return layouts;
}

absl::Status ValidateManifest(const CheckpointManifest& m) {
  if (m.format_version() < kOldestManifestFormatVersion || m.format_version() > kManifestFormatVersion) {
    return absl::UnimplementedError(absl::StrCat("checkpoint manifest format_version ", m.format_version(),
                                                 " is not supported; this build reads versions ",
                                                 kOldestManifestFormatVersion, " to ", kManifestFormatVersion));
  }
  if (m.step() < 0) return Invalid(absl::StrCat("step ", m.step(), " is negative"));
  if (m.skipped_steps() < 0) return Invalid(absl::StrCat("skipped_steps ", m.skipped_steps(), " is negative"));
  const CheckpointTopology& topo = m.topology();
  if (topo.dp() < 1 || topo.dp() > (1 << 20) || topo.tp() < 1 || topo.pp() < 1 || topo.alignment() < 1 ||
      topo.alignment() > (1 << 20) || topo.zero_stage() < 0 || topo.zero_stage() > 3) {
    return Invalid(absl::StrCat("topology dp=", topo.dp(), " tp=", topo.tp(), " pp=", topo.pp(), " zero_stage=",
                                topo.zero_stage(), " alignment=", topo.alignment(),
                                " is out of range (dp, tp, pp, alignment >= 1; stage 0-3)"));
  }
  if (m.kinds_size() < 1 || m.kinds(0) != kKindMaster) return Invalid("kinds must start with \"master\"");
  // master, or a state some registered optimizer keeps.
  std::vector<std::string> known = RegisteredStateCheckpointNames();
  known.insert(known.begin(), kKindMaster);
  std::set<std::string> kinds;
  for (const std::string& k : m.kinds()) {
    if (!kinds.insert(k).second || std::find(known.begin(), known.end(), k) == known.end()) {
      return Invalid(absl::StrCat("kind '", k, "' is repeated or not one of ", absl::StrJoin(known, ", ")));
    }
  }
  std::set<std::string> names;
  for (int u = 0; u < m.units_size(); ++u) {
    RETURN_IF_ERROR(ValidateUnit(m, u));
    for (const CheckpointParam& p : m.units(u).params()) {
      if (!names.insert(p.name()).second) return Invalid(absl::StrCat("parameter '", p.name(), "' is repeated"));
    }
  }
  for (int u = 0; u < m.units_size(); ++u) {
    for (const std::string& b : m.units(u).borrowed()) {
      if (names.count(b) == 0) return Invalid(absl::StrCat("unit ", u, " borrows unknown parameter '", b, "'"));
    }
  }
  ASSIGN_OR_RETURN(std::vector<FlatParamLayout> layouts, LayoutsFromManifest(m, topo.dp()));
  for (int u = 0; u < m.units_size(); ++u) {
    if (m.units(u).shard_numel() != layouts[u].shard_numel()) {
      return Invalid(absl::StrCat("unit ", u, " has shard_numel ", m.units(u).shard_numel(), ", but numel ",
                                  m.units(u).numel(), " over dp ", topo.dp(), " with alignment ", topo.alignment(),
                                  " gives ", layouts[u].shard_numel()));
    }
  }
  for (int u = 0; u < m.units_size(); ++u) {
    if (m.units(u).stage() < 0 || m.units(u).stage() >= topo.pp()) {
      return Invalid(absl::StrCat("unit ", u, " has stage ", m.units(u).stage(), ", expected in [0, ", topo.pp(), ")"));
    }
  }
  if (m.files_size() != topo.dp() * topo.tp() * topo.pp()) {
    return Invalid(absl::StrCat("lists ", m.files_size(), " shard files, expected one per (pp, dp, tp) rank (",
                                topo.pp(), " x ", topo.dp(), " x ", topo.tp(), ")"));
  }
  std::set<std::string> paths;
  for (int r = 0; r < m.files_size(); ++r) {
    RETURN_IF_ERROR(ValidateFile(m, r, layouts));
    if (!paths.insert(m.files(r).path()).second || m.files(r).path() == kManifestFileName) {
      return Invalid(absl::StrCat("file path '", m.files(r).path(), "' is repeated or reserved"));
    }
  }
  return absl::OkStatus();
}

void SetManifestUnits(const std::vector<FlatParamLayout>& layouts,
                      const std::vector<std::vector<std::string>>& borrowed, CheckpointManifest* manifest) {
  manifest->clear_units();
  for (size_t u = 0; u < layouts.size(); ++u) {
    const FlatParamLayout& l = layouts[u];
    CheckpointUnit* unit = manifest->add_units();
    unit->set_index(l.unit_index());
    unit->set_name(l.unit_name());
    unit->set_numel(l.numel());
    unit->set_shard_numel(l.shard_numel());
    for (const FlatParamInfo& p : l.params()) {
      CheckpointParam* param = unit->add_params();
      param->set_name(p.name);
      for (int64_t d : p.shape) param->add_shape(d);
      param->set_offset(p.offset);
      param->set_numel(p.numel);
    }
    if (u < borrowed.size()) {
      for (const std::string& b : borrowed[u]) unit->add_borrowed(b);
    }
  }
}

int64_t ManifestParamCount(const CheckpointManifest& manifest) {
  int64_t n = 0;
  for (const CheckpointUnit& u : manifest.units()) n += u.numel();
  return n;
}

}  // namespace zeroshard

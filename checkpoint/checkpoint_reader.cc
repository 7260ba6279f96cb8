#include "checkpoint/checkpoint_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "core/file_io.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<CheckpointReader> CheckpointReader::Open(const std::string& dir_or_root) {
  CheckpointReader reader;
  ASSIGN_OR_RETURN(reader.dir_, ResolveCheckpointDir(dir_or_root));
  const std::string path = JoinPath(reader.dir_, kManifestFileName);
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  ASSIGN_OR_RETURN(reader.manifest_, DecodeManifest(text, path));
  ASSIGN_OR_RETURN(reader.layouts_, LayoutsFromManifest(reader.manifest_, reader.dp()));
  return reader;
}

bool CheckpointReader::HasKind(absl::string_view kind) const {
  return std::find(manifest_.kinds().begin(), manifest_.kinds().end(), kind) != manifest_.kinds().end();
}

std::string CheckpointReader::FilePath(int file) const { return JoinPath(dir_, manifest_.files(file).path()); }

absl::Status CheckpointReader::CheckFileFrame(int file) const {
  const CheckpointFile& f = manifest_.files(file);
  const std::string path = FilePath(file);
  absl::StatusOr<int64_t> size = FileSize(path);
  if (!size.ok()) {
    std::string who = absl::StrCat("dp rank ", f.dp_rank());
    if (f.pp_rank() != 0) who = absl::StrCat("pp rank ", f.pp_rank(), " ", who);
    if (tp() > 1) absl::StrAppend(&who, " tp rank ", f.tp_rank());
    return absl::Status(size.status().code(), absl::StrCat("shard file of ", who, " is missing or unreadable: ",
                                                           size.status().message()));
  }
  if (*size != f.size_bytes()) {
    return absl::DataLossError(absl::StrCat("'", path, "' has ", *size, " bytes, the manifest says ", f.size_bytes(),
                                            *size < f.size_bytes() ? " (truncated)" : ""));
  }
  std::string header(static_cast<size_t>(8 + f.header_bytes()), '\0');
  RETURN_IF_ERROR(ReadFileRange(path, 0, 8 + f.header_bytes(), header.data()));
  const uint32_t crc = Crc32c(header);
  if (crc != f.header_crc32c()) {
    return absl::DataLossError(absl::StrFormat("'%s': safetensors header (bytes [0, %d)) has crc32c %08x, the "
                                               "manifest says %08x",
                                               path, 8 + f.header_bytes(), crc, f.header_crc32c()));
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::VerifyFile(int file) const {
  if (file < 0 || file >= manifest_.files_size()) {
    return absl::InvalidArgumentError(absl::StrCat("file ", file, " outside [0, ", manifest_.files_size(), ")"));
  }
  RETURN_IF_ERROR(CheckFileFrame(file));
  const CheckpointFile& f = manifest_.files(file);
  const std::string path = FilePath(file);
  ASSIGN_OR_RETURN(SafetensorsHeader header, ReadSafetensorsHeader(path));
  if (header.header_bytes != f.header_bytes() || static_cast<int>(header.tensors.size()) != f.tensors_size()) {
    return absl::DataLossError(absl::StrCat("'", path, "': header lists ", header.tensors.size(),
                                            " tensors, the manifest ", f.tensors_size()));
  }
  const int64_t base = header.data_offset();
  for (int t = 0; t < f.tensors_size(); ++t) {
    const CheckpointTensor& want = f.tensors(t);
    const SafetensorsTensorInfo& got = header.tensors[t];
    if (got.name != want.name() || SafetensorsDTypeName(got.dtype) != want.dtype() ||
        got.data_begin != want.data_begin() || got.data_end != want.data_end() ||
        !std::equal(got.shape.begin(), got.shape.end(), want.shape().begin(), want.shape().end())) {
      return absl::DataLossError(absl::StrCat("'", path, "': tensor ", t, " in the header is '", got.name,
                                              "' at [", got.data_begin, ", ", got.data_end, "), the manifest says '",
                                              want.name(), "' at [", want.data_begin(), ", ", want.data_end(), ")"));
    }
    std::string bytes(static_cast<size_t>(got.data_end - got.data_begin), '\0');
    RETURN_IF_ERROR(ReadFileRange(path, base + got.data_begin, got.data_end - got.data_begin, bytes.data()));
    const uint32_t crc = Crc32c(bytes);
    if (crc != want.crc32c()) {
      return absl::DataLossError(absl::StrFormat("'%s': tensor '%s' (file bytes [%d, %d)) has crc32c %08x, the "
                                                 "manifest says %08x",
                                                 path, got.name, base + got.data_begin, base + got.data_end, crc,
                                                 want.crc32c()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const std::vector<float>*> CheckpointReader::ShardTensor(int file, int unit,
                                                                         absl::string_view kind) const {
  const std::string name = ShardTensorName(unit, kind);
  if (cached_.file == file && cached_.name == name) return &cached_.values;
  cached_.file = -1;
  RETURN_IF_ERROR(CheckFileFrame(file));
  const CheckpointFile& f = manifest_.files(file);
  const CheckpointTensor* tensor = nullptr;
  for (const CheckpointTensor& t : f.tensors()) {
    if (t.name() == name) tensor = &t;
  }
  if (tensor == nullptr) {
    return absl::NotFoundError(absl::StrCat("'", FilePath(file), "' has no tensor '", name, "'"));
  }
  const int64_t bytes = tensor->data_end() - tensor->data_begin();
  std::vector<float>& out = cached_.values;
  out.assign(static_cast<size_t>(bytes / 4), 0.0f);
  const std::string path = FilePath(file);
  RETURN_IF_ERROR(ReadFileRange(path, 8 + f.header_bytes() + tensor->data_begin(), bytes, out.data()));
  const uint32_t crc = Crc32c(out.data(), static_cast<size_t>(bytes));
  if (crc != tensor->crc32c()) {
    return absl::DataLossError(absl::StrFormat("'%s': tensor '%s' has crc32c %08x, the manifest says %08x", path,
                                               name, crc, tensor->crc32c()));
  }
  cached_.file = file;
  cached_.name = name;
  return &cached_.values;
}

absl::Status CheckpointReader::ReadFlat(int unit, absl::string_view kind, int64_t begin, int64_t count, float* out,
                                        int tp_rank) const {
  if (unit < 0 || unit >= static_cast<int>(layouts_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("unit ", unit, " outside [0, ", layouts_.size(), ")"));
  }
  if (!HasKind(kind)) {
    return absl::NotFoundError(absl::StrCat("checkpoint '", dir_, "' holds no '", kind, "' state (kinds: ",
                                            absl::StrJoin(manifest_.kinds(), ", "), ")"));
  }
  if (tp_rank < 0 || tp_rank >= tp()) {
    return absl::InvalidArgumentError(absl::StrCat("tp rank ", tp_rank, " outside [0, ", tp(), ")"));
  }
  const FlatParamLayout& l = layouts_[unit];
  if (count == 0 && begin >= 0) return absl::OkStatus();
  if (begin < 0 || count < 0 || begin + count > l.padded_numel()) {
    return absl::InvalidArgumentError(absl::StrCat("range [", begin, ", ", begin + count, ") of unit ", unit,
                                                   " outside its ", l.padded_numel(), " elements"));
  }
  const int64_t s = l.shard_numel();
  // The unit's shards are in the files of the stage that computed it, dp
  // rank r's of tp rank t at stage_first + r·tp + t.
  const int first_file = manifest_.units(unit).stage() * l.dp() * tp();
  for (int r = static_cast<int>(begin / s); r < l.dp() && r * s < begin + count; ++r) {
    ASSIGN_OR_RETURN(const std::vector<float>* shard, ShardTensor(first_file + r * tp() + tp_rank, unit, kind));
    const int64_t lo = std::max(begin, r * s), hi = std::min(begin + count, (r + 1) * s);
    std::memcpy(out + (lo - begin), shard->data() + (lo - r * s), static_cast<size_t>(hi - lo) * sizeof(float));
  }
  for (int64_t i = std::max(begin, l.numel()); i < begin + count; ++i) out[i - begin] = 0.0f;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CheckpointReader::ReadParam(int unit, int param, absl::string_view kind) const {
  if (unit < 0 || unit >= static_cast<int>(layouts_.size()) || param < 0 ||
      param >= static_cast<int>(layouts_[unit].params().size())) {
    return absl::InvalidArgumentError(absl::StrCat("no parameter ", param, " in unit ", unit));
  }
  const FlatParamInfo& p = layouts_[unit].params()[param];
  const CheckpointParam& cp = manifest_.units(unit).params(param);
  std::vector<float> local(static_cast<size_t>(p.numel));
  RETURN_IF_ERROR(ReadFlat(unit, kind, p.offset, p.numel, local.data()));
  const ParamSpec spec = ParamSpecOf(cp);
  if (cp.split_dim() < 0) return spec.padded() ? DropPadding(spec, local.data()) : local;
  std::vector<float> whole(static_cast<size_t>(spec.numel()));
  for (int t = 0; t < tp(); ++t) {
    if (t > 0) RETURN_IF_ERROR(ReadFlat(unit, kind, p.offset, p.numel, local.data(), t));
    PlaceLocalSlice(spec, t, tp(), local.data(), whole.data());
  }
  return spec.padded() ? DropPadding(spec, whole.data()) : whole;
}

}  // namespace zeroshard

#include "checkpoint/shard_file.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "core/file_io.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<CheckpointFile> WriteShardFile(const std::string& dir, int pp_rank, int dp_rank, int tp_rank,
                                              int64_t step,
                                              const std::vector<FlatParamLayout>& layouts,
                                              const std::vector<std::string>& kinds,
                                              absl::FunctionRef<absl::StatusOr<const float*>(int unit, int kind)> data) {
  std::vector<SafetensorsTensorData> tensors;
  std::vector<std::pair<int, int>> unit_kind;  // of each tensor
  for (const FlatParamLayout& l : layouts) {
    if (l.numel() == 0) continue;
    for (int k = 0; k < static_cast<int>(kinds.size()); ++k) {
      tensors.push_back({ShardTensorName(l.unit_index(), kinds[k]), DType::kF32, {l.shard_numel()}, nullptr});
      unit_kind.emplace_back(l.unit_index(), k);
    }
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "zeroshard-shard"},
      {"pp_rank", absl::StrCat(pp_rank)},
      {"dp_rank", absl::StrCat(dp_rank)},
      {"tp_rank", absl::StrCat(tp_rank)},
      {"step", absl::StrCat(step)}};
  CheckpointFile file;
  file.set_path(ShardFileName(pp_rank, dp_rank, tp_rank));
  ASSIGN_OR_RETURN(SafetensorsWriteResult written,
                   WriteSafetensorsStreamed(JoinPath(dir, file.path()), tensors, metadata,
                                            [&](size_t i) -> absl::StatusOr<const void*> {
                                              ASSIGN_OR_RETURN(const float* values,
                                                               data(unit_kind[i].first, unit_kind[i].second));
                                              return values;
                                            }));
  file.set_pp_rank(pp_rank);
  file.set_dp_rank(dp_rank);
  file.set_tp_rank(tp_rank);
  file.set_size_bytes(written.file_bytes);
  file.set_header_bytes(written.header_bytes);
  file.set_header_crc32c(written.header_crc32c);
  for (size_t i = 0; i < written.tensors.size(); ++i) {
    const SafetensorsTensorInfo& t = written.tensors[i];
    CheckpointTensor* out = file.add_tensors();
    out->set_name(t.name);
    out->set_dtype(SafetensorsDTypeName(t.dtype));
    for (int64_t d : t.shape) out->add_shape(d);
    out->set_data_begin(t.data_begin);
    out->set_data_end(t.data_end);
    out->set_crc32c(written.tensor_crc32c[i]);
  }
  return file;
}

}  // namespace zeroshard

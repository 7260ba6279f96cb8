#include "checkpoint/consolidate.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::Status ConsolidateCheckpoint(const CheckpointReader& reader, const std::string& out_path,
                                   const ConsolidateOptions& options) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16 && options.dtype != DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("consolidate dtype ", DTypeName(options.dtype), " is not one of f32, bf16, f16"));
  }
  const CheckpointManifest& m = reader.manifest();
  std::vector<std::string> kinds = {kKindMaster};
  if (options.optimizer) kinds.assign(m.kinds().begin(), m.kinds().end());
  // Owned storage for every tensor's bytes (f32 or 16-bit).
  std::vector<std::vector<float>> f32s;
  std::vector<std::vector<uint16_t>> halves;
  std::vector<SafetensorsTensorData> tensors;
  for (const std::string& kind : kinds) {
    const bool master = kind == kKindMaster;
    for (int u = 0; u < m.units_size(); ++u) {
      for (int p = 0; p < m.units(u).params_size(); ++p) {
        const CheckpointParam& param = m.units(u).params(p);
        ASSIGN_OR_RETURN(std::vector<float> values, reader.ReadParam(u, p, kind));
        SafetensorsTensorData t;
        t.name = master ? param.name() : absl::StrCat("optimizer.", kind, ".", param.name());
        t.shape = ParamSpecOf(param).logical();  // whole, unpadded
        if (!master || options.dtype == DType::kF32) {
          t.dtype = DType::kF32;
          f32s.push_back(std::move(values));
          t.data = f32s.back().data();
        } else {
          t.dtype = options.dtype;
          std::vector<uint16_t> h(values.size());
          for (size_t i = 0; i < values.size(); ++i) {
            h[i] = options.dtype == DType::kBF16 ? F32ToBF16(values[i]) : F32ToF16(values[i]);
          }
          halves.push_back(std::move(h));
          t.data = halves.back().data();
        }
        tensors.push_back(std::move(t));
      }
    }
  }
  // Pointers into f32s/halves stay valid: the vectors' buffers never move
  // (moving a std::vector keeps its heap block) even when the outer
  // vectors grow.
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"zeroshard.step", absl::StrCat(m.step())},
      {"zeroshard.optimizer_steps", absl::StrCat(m.optimizer_steps())},
      {"zeroshard.dtype", DTypeName(options.dtype)},
  };
  return WriteSafetensors(out_path, tensors, metadata).status();
}

}  // namespace zeroshard

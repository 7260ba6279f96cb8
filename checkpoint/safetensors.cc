#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/crc32c.h"
#include "core/file_io.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

using Json = nlohmann::json;

// Largest numel * element size we accept: keeps every product below 2^62.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

// A non-negative integer JSON value (nlohmann stores small non-negative
// numbers as unsigned or as integer depending on the text).
bool AsNonNegative(const Json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(kMaxTensorBytes)) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0 || i > kMaxTensorBytes) return false;
    *out = i;
    return true;
  }
  return false;
}

absl::Status Bad(absl::string_view tensor, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("safetensors header: tensor '", tensor, "': ", what));
}

absl::StatusOr<SafetensorsTensorInfo> ParseTensor(const std::string& name, const Json& v) {
  SafetensorsTensorInfo info;
  info.name = name;
  if (!v.is_object()) return Bad(name, "entry is not a JSON object");
  auto dtype = v.find("dtype");
  auto shape = v.find("shape");
  auto offsets = v.find("data_offsets");
  if (dtype == v.end() || !dtype->is_string()) return Bad(name, "missing string field \"dtype\"");
  if (shape == v.end() || !shape->is_array()) return Bad(name, "missing array field \"shape\"");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
    return Bad(name, "missing field \"data_offsets\" of two integers");
  }
  absl::StatusOr<DType> dt = SafetensorsDTypeFromName(dtype->get_ref<const std::string&>());
  if (!dt.ok()) return Bad(name, dt.status().message());
  info.dtype = *dt;
  int64_t numel = 1;
  for (const Json& d : *shape) {
    int64_t dim = 0;
    if (!AsNonNegative(d, &dim)) return Bad(name, absl::StrCat("shape entry ", d.dump(), " is not a dimension"));
    info.shape.push_back(dim);
    if (dim != 0 && numel > kMaxTensorBytes / dim) return Bad(name, "shape has too many elements");
    numel *= dim;
  }
  if (!AsNonNegative((*offsets)[0], &info.data_begin) || !AsNonNegative((*offsets)[1], &info.data_end) ||
      info.data_end < info.data_begin) {
    return Bad(name, absl::StrCat("data_offsets ", offsets->dump(), " is not [begin, end] with begin <= end"));
  }
  const int64_t size = static_cast<int64_t>(DTypeSize(info.dtype));
  if (numel > kMaxTensorBytes / size || info.data_end - info.data_begin != numel * size) {
    return Bad(name, absl::StrCat("data_offsets [", info.data_begin, ", ", info.data_end, "] hold ",
                                  info.data_end - info.data_begin, " bytes, but ", dtype->get<std::string>(), " ",
                                  shape->dump(), " needs ", numel, " x ", size));
  }
  return info;
}

}  // namespace

int64_t SafetensorsTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const SafetensorsTensorInfo* SafetensorsHeader::Find(absl::string_view name) const {
  for (const SafetensorsTensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const char* SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kU16: return "U16";
    case DType::kI8: return "I8";
  }
  return "?";
}

absl::StatusOr<DType> SafetensorsDTypeFromName(absl::string_view name) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kU16, DType::kI8}) {
    if (name == SafetensorsDTypeName(d)) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype \"", name, "\" is not one of F32, F16, BF16, I32, U16, I8"));
}

absl::StatusOr<int64_t> ParseSafetensorsHeaderLength(absl::string_view first_bytes, int64_t file_size) {
  if (first_bytes.size() < 8 || file_size < 8) {
    return absl::DataLossError(
        absl::StrCat("safetensors file has ", file_size, " bytes, fewer than the 8-byte header length"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(first_bytes[i]);
  if (n > static_cast<uint64_t>(kMaxSafetensorsHeaderBytes) || n > static_cast<uint64_t>(file_size - 8)) {
    return absl::DataLossError(absl::StrCat("safetensors header length ", n, " exceeds the file's ", file_size - 8,
                                            " bytes after the length (or the ", kMaxSafetensorsHeaderBytes,
                                            "-byte limit)"));
  }
  if (n < 2) return absl::DataLossError(absl::StrCat("safetensors header length ", n, " is too short for '{}'"));
  return static_cast<int64_t>(n);
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view prefix, int64_t file_size) {
  SafetensorsHeader header;
  ASSIGN_OR_RETURN(header.header_bytes, ParseSafetensorsHeaderLength(prefix, file_size));
  if (static_cast<int64_t>(prefix.size()) < 8 + header.header_bytes) {
    return absl::DataLossError(absl::StrCat("safetensors header needs ", 8 + header.header_bytes,
                                            " bytes, got ", prefix.size()));
  }
  absl::string_view text = prefix.substr(8, static_cast<size_t>(header.header_bytes));
  if (text[0] != '{') return absl::DataLossError("safetensors header does not start with '{'");
  // JSON keeps the last of two equal keys; a tensor defined twice is
  // ambiguous, so the parser sees every top-level key.
  std::set<std::string> seen;
  std::string duplicate;
  const Json::parser_callback_t on_key = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  Json json = Json::parse(text.begin(), text.end(), on_key, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::DataLossError("safetensors header is not a valid JSON object");
  }
  if (!duplicate.empty()) {
    return absl::DataLossError(absl::StrCat("safetensors header defines '", duplicate, "' twice"));
  }
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return absl::DataLossError("safetensors __metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) {
          return absl::DataLossError(absl::StrCat("safetensors __metadata__ value of '", m.key(), "' is not a string"));
        }
        header.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    ASSIGN_OR_RETURN(SafetensorsTensorInfo info, ParseTensor(it.key(), it.value()));
    header.tensors.push_back(std::move(info));
  }
  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
                     return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
                   });
  const int64_t data_bytes = file_size - 8 - header.header_bytes;
  int64_t at = 0;
  for (const SafetensorsTensorInfo& t : header.tensors) {
    if (t.data_begin != at) {
      return absl::DataLossError(absl::StrCat("safetensors tensor '", t.name, "' starts at data byte ", t.data_begin,
                                              ", expected ", at, " (tensors must tile the data region)"));
    }
    at = t.data_end;
  }
  if (at != data_bytes) {
    return absl::DataLossError(absl::StrCat("safetensors data region has ", data_bytes,
                                            " bytes but the tensors cover ", at,
                                            at > data_bytes ? " (file truncated?)" : " (trailing bytes)"));
  }
  return header;
}

absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  ASSIGN_OR_RETURN(int64_t size, FileSize(path));
  char first[8] = {0};
  RETURN_IF_ERROR(ReadFileRange(path, 0, std::min<int64_t>(8, size), first));
  absl::StatusOr<int64_t> n = ParseSafetensorsHeaderLength(absl::string_view(first, 8), size);
  if (!n.ok()) return absl::DataLossError(absl::StrCat("'", path, "': ", n.status().message()));
  std::string prefix(static_cast<size_t>(8 + *n), '\0');
  RETURN_IF_ERROR(ReadFileRange(path, 0, 8 + *n, prefix.data()));
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(prefix, size);
  if (!header.ok()) return absl::DataLossError(absl::StrCat("'", path, "': ", header.status().message()));
  return header;
}

absl::StatusOr<std::string> EncodeSafetensorsHeader(const std::vector<SafetensorsTensorData>& tensors,
                                                    const std::map<std::string, std::string>& metadata,
                                                    std::vector<SafetensorsTensorInfo>* layout) {
  layout->clear();
  std::set<std::string> names;
  std::vector<std::string> entries;
  if (!metadata.empty()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : metadata) kv.push_back(absl::StrCat(JsonString(k), ":", JsonString(v)));
    entries.push_back(absl::StrCat("\"__metadata__\":{", absl::StrJoin(kv, ","), "}"));
  }
  int64_t at = 0;
  for (const SafetensorsTensorData& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors tensor name '", t.name,
                                                     "' is empty, reserved or repeated"));
    }
    SafetensorsTensorInfo info;
    info.name = t.name;
    info.dtype = t.dtype;
    info.shape = t.shape;
    for (int64_t d : t.shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has dimension ", d));
    }
    info.data_begin = at;
    info.data_end = at + info.numel() * static_cast<int64_t>(DTypeSize(t.dtype));
    at = info.data_end;
    entries.push_back(absl::StrCat(JsonString(t.name), ":{\"dtype\":\"", SafetensorsDTypeName(t.dtype),
                                   "\",\"shape\":[", absl::StrJoin(t.shape, ","), "],\"data_offsets\":[",
                                   info.data_begin, ",", info.data_end, "]}"));
    layout->push_back(std::move(info));
  }
  std::string json = absl::StrCat("{", absl::StrJoin(entries, ","), "}");
  while ((8 + json.size()) % 8 != 0) json.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += json;
  return out;
}

absl::StatusOr<SafetensorsWriteResult> WriteSafetensorsStreamed(
    const std::string& path, const std::vector<SafetensorsTensorData>& tensors,
    const std::map<std::string, std::string>& metadata,
    absl::FunctionRef<absl::StatusOr<const void*>(size_t tensor)> data_of) {
  SafetensorsWriteResult result;
  ASSIGN_OR_RETURN(std::string header, EncodeSafetensorsHeader(tensors, metadata, &result.tensors));
  result.header_bytes = static_cast<int64_t>(header.size()) - 8;
  result.header_crc32c = Crc32c(header);
  result.file_bytes = static_cast<int64_t>(header.size()) + (result.tensors.empty() ? 0 : result.tensors.back().data_end);
  size_t next = 0;  // the next piece: 0 the header, i + 1 tensor i
  RETURN_IF_ERROR(WriteFileDurablyFrom(path, result.file_bytes, [&]() -> absl::StatusOr<absl::string_view> {
    if (next == 0) {
      ++next;
      return absl::string_view(header);
    }
    while (next <= tensors.size()) {
      const size_t i = next++ - 1;
      const SafetensorsTensorInfo& t = result.tensors[i];
      const size_t n = static_cast<size_t>(t.data_end - t.data_begin);
      if (n == 0) {
        result.tensor_crc32c.push_back(Crc32c(absl::string_view()));
        continue;
      }
      ASSIGN_OR_RETURN(const void* data, data_of(i));
      absl::string_view bytes(static_cast<const char*>(data), n);
      result.tensor_crc32c.push_back(Crc32c(bytes));
      return bytes;
    }
    return absl::string_view();
  }));
  // Trailing empty tensors produce no piece.
  while (result.tensor_crc32c.size() < tensors.size()) result.tensor_crc32c.push_back(Crc32c(absl::string_view()));
  return result;
}

absl::StatusOr<SafetensorsWriteResult> WriteSafetensors(const std::string& path,
                                                        const std::vector<SafetensorsTensorData>& tensors,
                                                        const std::map<std::string, std::string>& metadata) {
  return WriteSafetensorsStreamed(path, tensors, metadata,
                                  [&](size_t i) -> absl::StatusOr<const void*> { return tensors[i].data; });
}

}  // namespace zeroshard

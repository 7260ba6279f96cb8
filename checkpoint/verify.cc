#include "checkpoint/verify.h"

#include "checkpoint/checkpoint_reader.h"

namespace zeroshard {

std::vector<absl::Status> VerifyCheckpoint(const std::string& dir_or_root) {
  std::vector<absl::Status> problems;
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir_or_root);
  if (!reader.ok()) {
    problems.push_back(reader.status());
    return problems;
  }
  for (int r = 0; r < reader->manifest().files_size(); ++r) {
    absl::Status s = reader->VerifyFile(r);
    if (!s.ok()) problems.push_back(s);
  }
  return problems;
}

}  // namespace zeroshard

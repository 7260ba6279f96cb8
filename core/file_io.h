// POSIX file operations (checkpoints, the trace writer), as absl::Status: whole and
// partial reads, durable writes (fsync of the file and of its directory),
// renames, directory creation and removal. Every error names the path and
// the system's reason. No function throws or prints.
#ifndef ZEROSHARD_CORE_FILE_IO_H_
#define ZEROSHARD_CORE_FILE_IO_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zeroshard {

// kNotFound when the path does not exist; kDataLoss when the file ends
// before offset + n; kInternal for other I/O errors.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);
absl::StatusOr<int64_t> FileSize(const std::string& path);
absl::Status ReadFileRange(const std::string& path, int64_t offset, int64_t n, void* out);

// Writes `pieces` one after another into a new file (replacing any old one)
// and fsyncs it. The directory entry is durable only after SyncDirectory.
// On failure the partial file is removed, so it holds no space. A full disk
// (or quota) is kResourceExhausted, a denied access kPermissionDenied.
absl::Status WriteFileDurably(const std::string& path, const std::vector<absl::string_view>& pieces);
// The same for a file of `total_bytes` produced piece by piece: each piece
// `next_piece` returns need stay valid only until the next call, so a writer
// can stage one piece at a time. An error it returns ends the write (the
// partial file removed); fewer than `total_bytes` bytes is kInternal.
absl::Status WriteFileDurablyFrom(const std::string& path, int64_t total_bytes,
                                  absl::FunctionRef<absl::StatusOr<absl::string_view>()> next_piece);
absl::Status SyncDirectory(const std::string& dir);

// mkdir -p. OK when the directory exists already.
absl::Status MakeDirectories(const std::string& dir);
// rename(2): atomic replacement of `to` when it is a file or an empty directory.
absl::Status RenamePath(const std::string& from, const std::string& to);
// Atomically swaps two existing paths (renameat2 RENAME_EXCHANGE): at every
// moment each name refers to one of the two. kUnimplemented when the file
// system or kernel cannot (callers then fall back to two renames).
absl::Status ExchangePaths(const std::string& a, const std::string& b);
// rm -r; OK when the path does not exist.
absl::Status RemoveTree(const std::string& path);
bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);
// Names of the entries of `dir` (not "." or ".."), sorted.
absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir);

// Test-only fault injection, process-wide. While set, WriteFileDurably,
// SyncDirectory, MakeDirectories, RenamePath and ExchangePaths first ask
// `fault(op, path)` (for renames, `path` is the destination); a nonzero
// errno makes the operation fail as that system call would have, kWrite
// after writing half of the data, as a full disk does. nullptr clears it.
enum class FileOp { kCreate, kWrite, kSync, kMakeDirectory, kRename };
void SetFileFaultForTesting(std::function<int(FileOp op, const std::string& path)> fault);

std::string JoinPath(absl::string_view a, absl::string_view b);
// The directory part of `path`: "." for a bare name, "/" for "/name".
std::string DirName(absl::string_view path);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_FILE_IO_H_

#include "comm/status_agreement.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

constexpr char kRelayedUrl[] = "type.zeroshard/relayed";

// "dp.control" agrees for the dp group: name the group, not the channel.
std::string GroupName(const Communicator& comm) {
  const std::string& name = comm.name();
  return name.substr(0, name.find('.'));
}

}  // namespace

absl::Status RelayedError(absl::StatusCode code, absl::string_view message) {
  absl::Status s(code, message);
  s.SetPayload(kRelayedUrl, absl::Cord("1"));
  return s;
}

bool IsRelayedError(const absl::Status& status) { return status.GetPayload(kRelayedUrl).has_value(); }

absl::Status AgreeAcrossRanks(Communicator& comm, const absl::Status& local, absl::string_view what) {
  const std::string group = GroupName(comm);
  const int n = comm.size();
  // codes[r] = status code of rank r (0 = OK); kMax leaves each rank's own.
  std::vector<int32_t> codes(static_cast<size_t>(n), 0);
  codes[comm.rank()] = static_cast<int32_t>(local.code());
  absl::Status comm_status = comm.AllReduce(codes.data(), n, DType::kI32, ReduceOp::kMax)->Wait();
  if (!local.ok()) return local;
  if (!comm_status.ok()) return comm_status;
  for (int r = 0; r < n; ++r) {
    if (codes[r] != 0) {
      return RelayedError(static_cast<absl::StatusCode>(codes[r]),
                          absl::StrCat(what, " failed on ", group, " rank ", r, " (see its error); this rank (",
                                       comm.rank(), ") was fine"));
    }
  }
  return absl::OkStatus();
}

absl::Status AgreeAcrossRanksSharingError(Communicator& comm, const absl::Status& local, absl::string_view what) {
  const int n = comm.size();
  std::vector<int32_t> codes(static_cast<size_t>(n), 0);
  codes[comm.rank()] = static_cast<int32_t>(local.code());
  absl::Status comm_status = comm.AllReduce(codes.data(), n, DType::kI32, ReduceOp::kMax)->Wait();
  if (!comm_status.ok()) return local.ok() ? comm_status : local;
  int failed = -1;
  for (int r = 0; r < n && failed < 0; ++r) {
    if (codes[r] != 0) failed = r;
  }
  if (failed < 0) return absl::OkStatus();
  // The failing rank's message: its length, then its bytes in i32 words.
  const std::string mine(comm.rank() == failed ? local.message() : absl::string_view());
  int32_t length = static_cast<int32_t>(mine.size());
  comm_status = comm.Broadcast(&length, 1, DType::kI32, failed)->Wait();
  std::vector<int32_t> words(static_cast<size_t>(length + 3) / 4, 0);
  if (comm_status.ok() && !words.empty()) {
    std::memcpy(words.data(), mine.data(), mine.size());
    comm_status = comm.Broadcast(words.data(), static_cast<int64_t>(words.size()), DType::kI32, failed)->Wait();
  }
  if (!comm_status.ok()) return local.ok() ? comm_status : local;
  const std::string message =
      absl::StrCat(what, " failed on ", GroupName(comm), " rank ", failed, ": ",
                   absl::string_view(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(length)));
  const absl::StatusCode code = static_cast<absl::StatusCode>(codes[failed]);
  if (comm.rank() != failed) return RelayedError(code, message);
  absl::Status out(code, message);
  local.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace zeroshard

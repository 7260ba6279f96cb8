#include "comm/status_agreement.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

constexpr char kRelayedUrl[] = "type.zeroshard/relayed";

}  // namespace

absl::Status RelayedError(absl::StatusCode code, absl::string_view message) {
  absl::Status s(code, message);
  s.SetPayload(kRelayedUrl, absl::Cord("1"));
  return s;
}

bool IsRelayedError(const absl::Status& status) { return status.GetPayload(kRelayedUrl).has_value(); }

absl::Status AgreeAcrossRanks(Communicator& comm, const absl::Status& local, absl::string_view what) {
  // "dp.control" agrees for the dp group: name the group, not the channel.
  const std::string& name = comm.name();
  const std::string group = name.substr(0, name.find('.'));
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

}  // namespace zeroshard

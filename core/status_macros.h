// Status propagation macros (Abseil 20220623 ships none).
//
//   RETURN_IF_ERROR(expr);                 // returns the status if not OK
//   ASSIGN_OR_RETURN(auto x, MakeX());     // unwraps a StatusOr or returns
#ifndef ZEROSHARD_CORE_STATUS_MACROS_H_
#define ZEROSHARD_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ZS_STATUS_CONCAT_INNER_(a, b) a##b
#define ZS_STATUS_CONCAT_(a, b) ZS_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    const ::absl::Status zs_status_ = (expr);      \
    if (!zs_status_.ok()) return zs_status_;       \
  } while (0)

#define ZS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ZS_ASSIGN_OR_RETURN_IMPL_(ZS_STATUS_CONCAT_(zs_statusor_, __LINE__), lhs, rexpr)

#endif  // ZEROSHARD_CORE_STATUS_MACROS_H_

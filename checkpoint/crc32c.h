// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and
// final xor 0xFFFFFFFF), the checksum of every checkpoint file and tensor.
// Crc32c("123456789") == 0xE3069283, as iSCSI (RFC 3720) and LevelDB use.
#ifndef ZEROSHARD_CHECKPOINT_CRC32C_H_
#define ZEROSHARD_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace zeroshard {

// Continues a CRC: Crc32cExtend(Crc32c(a), b) == Crc32c(a + b). Start from 0.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }
inline uint32_t Crc32c(absl::string_view s) { return Crc32cExtend(0, s.data(), s.size()); }

// Crc32cExtend picks, once, the x86-64 SSE4.2 crc32 instruction where the
// CPU has it (about 5x the table code) and slicing-by-8 tables elsewhere.
// Both are exposed so a test can hold each to the definition.
namespace crc32c_internal {
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);
bool HardwareAvailable();
// Only where HardwareAvailable().
uint32_t ExtendHardware(uint32_t crc, const void* data, size_t n);
}  // namespace crc32c_internal

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_CRC32C_H_

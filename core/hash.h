// Hashes whose values are stable across processes, builds and machines
// (absl::Hash is salted per process): fingerprints that ranks compare, and
// counter-based random streams that every rank must draw alike.
#ifndef ZEROSHARD_CORE_HASH_H_
#define ZEROSHARD_CORE_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace zeroshard {

// FNV-1a, 64 bit.
inline uint64_t Fnv1a64(absl::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// splitmix64's output function (a bijective mixer of 64 bits).
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One splitmix64 step from state z: Mix64(z + the golden-ratio increment).
inline uint64_t SplitMix64(uint64_t z) { return Mix64(z + 0x9e3779b97f4a7c15ull); }

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_HASH_H_

// A deterministic generator of English-like text, so training tests and
// examples need no download. Sentences come from a small grammar (determiner,
// adjectives, noun, verb, prepositional phrase) over a fixed word list, so the
// text has word, spelling and sentence structure a small model can learn
// quickly, while its byte unigram entropy stays near real English (~4 bits).
#ifndef ZEROSHARD_DATA_ENGLISH_LIKE_CORPUS_H_
#define ZEROSHARD_DATA_ENGLISH_LIKE_CORPUS_H_

#include <cstdint>
#include <string>

namespace zeroshard {

// Exactly `num_bytes` bytes of printable ASCII plus '\n'; the same (seed,
// num_bytes) always gives the same text, and a longer text extends a shorter
// one with the same seed.
std::string GenerateEnglishLikeText(uint64_t seed, int64_t num_bytes);

}  // namespace zeroshard

#endif  // ZEROSHARD_DATA_ENGLISH_LIKE_CORPUS_H_

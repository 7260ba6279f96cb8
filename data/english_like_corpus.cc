#include "data/english_like_corpus.h"

#include <cctype>
#include <vector>

namespace zeroshard {
namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Next() % v.size()];
  }
  bool Chance(int percent) { return static_cast<int>(Next() % 100) < percent; }

 private:
  uint64_t state_;
};

const std::vector<const char*> kDeterminers = {"the", "a", "every", "one", "that", "this", "my", "our"};
const std::vector<const char*> kAdjectives = {"small", "old",   "bright", "quiet", "green", "heavy",
                                              "quick", "brave", "gentle", "warm",  "dark",  "clever"};
const std::vector<const char*> kNouns = {"cat",   "dog",    "river", "teacher", "garden", "house", "bird",
                                         "child", "stone",  "ship",  "farmer",  "letter", "tree",  "window",
                                         "king",  "market", "road",  "friend"};
const std::vector<const char*> kVerbs = {"sees",   "finds", "carries", "follows", "watches", "builds",
                                         "paints", "calls", "opens",   "reads",   "keeps",   "likes"};
const std::vector<const char*> kIntransitive = {"sleeps", "waits", "sings", "runs", "rests", "laughs"};
const std::vector<const char*> kPrepositions = {"near", "under", "behind", "over", "beside", "across", "past"};
const std::vector<const char*> kAdverbs = {"slowly", "today", "again", "at night", "in the morning", "quietly"};

void AppendNounPhrase(SplitMix64& rng, std::string* out) {
  out->append(rng.Pick(kDeterminers));
  if (rng.Chance(40)) {
    out->push_back(' ');
    out->append(rng.Pick(kAdjectives));
  }
  out->push_back(' ');
  out->append(rng.Pick(kNouns));
}

std::string Sentence(SplitMix64& rng) {
  std::string s;
  AppendNounPhrase(rng, &s);
  s.push_back(' ');
  if (rng.Chance(70)) {
    s.append(rng.Pick(kVerbs));
    s.push_back(' ');
    AppendNounPhrase(rng, &s);
  } else {
    s.append(rng.Pick(kIntransitive));
  }
  if (rng.Chance(50)) {
    s.push_back(' ');
    s.append(rng.Pick(kPrepositions));
    s.push_back(' ');
    AppendNounPhrase(rng, &s);
  }
  if (rng.Chance(25)) {
    s.push_back(' ');
    s.append(rng.Pick(kAdverbs));
  }
  s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  s.push_back(rng.Chance(85) ? '.' : '!');
  return s;
}

}  // namespace

std::string GenerateEnglishLikeText(uint64_t seed, int64_t num_bytes) {
  SplitMix64 rng(seed);
  std::string text;
  text.reserve(static_cast<size_t>(num_bytes) + 128);
  int sentences_in_paragraph = 0;
  while (static_cast<int64_t>(text.size()) < num_bytes) {
    text.append(Sentence(rng));
    if (++sentences_in_paragraph >= 4 && rng.Chance(30)) {
      text.push_back('\n');
      sentences_in_paragraph = 0;
    } else {
      text.push_back(' ');
    }
  }
  text.resize(static_cast<size_t>(num_bytes));
  return text;
}

}  // namespace zeroshard

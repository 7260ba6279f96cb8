// A main for the fuzz targets without libFuzzer (gcc builds): replays every
// corpus file given, then runs a bounded random-mutation loop over them
// (bit flips, byte sets, inserts, deletes, duplications, truncations,
// splices). A crash or abort in the target fails the run; otherwise it
// prints what it did and exits 0.
//   FUZZER [--iterations=N] [--seconds=S] [--seed=X] FILE...
// The mutation seed is fixed per fuzzer unless --seed or ZS_TEST_SEED
// (core/testing/test_seed.h) sets it.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/testing/test_seed.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Mutate(std::mt19937_64& rng, const std::vector<std::string>& corpus, std::string* s) {
  const int rounds = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < rounds; ++i) {
    const size_t n = s->size();
    switch (rng() % 7) {
      case 0:
        if (n > 0) (*s)[rng() % n] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        if (n > 0) (*s)[rng() % n] = static_cast<char>(rng());
        break;
      case 2: {
        static const char* kInteresting[] = {"0", "-1", "4294967296", "18446744073709551615", "\"", "{", "}", "[",
                                             "]", ",", ":", "\\u0000", "9999999999999999999999", "F64", "BF16"};
        const std::string piece = rng() % 2 ? std::string(1, static_cast<char>(rng()))
                                            : kInteresting[rng() % (sizeof(kInteresting) / sizeof(*kInteresting))];
        s->insert(n == 0 ? 0 : rng() % (n + 1), piece);
        break;
      }
      case 3:
        if (n > 0) {
          const size_t at = rng() % n;
          s->erase(at, 1 + rng() % std::min<size_t>(16, n - at));
        }
        break;
      case 4:
        if (n > 0) {
          const size_t at = rng() % n, len = 1 + rng() % std::min<size_t>(32, n - at);
          s->insert(rng() % (n + 1), s->substr(at, len));
        }
        break;
      case 5:
        if (n > 0) s->resize(rng() % n);
        break;
      case 6: {
        const std::string& other = corpus[rng() % corpus.size()];
        if (!other.empty()) {
          const size_t cut = n == 0 ? 0 : rng() % n;
          *s = s->substr(0, cut) + other.substr(rng() % other.size());
        }
        break;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  long long iterations = 10000, seconds = 10;
  // Fixed per fuzzer unless ZS_TEST_SEED says otherwise; --seed overrides.
  const char* slash = std::strrchr(argv[0], '/');
  unsigned long long seed = zeroshard::TestSeedFor(slash != nullptr ? slash + 1 : argv[0], zeroshard::SeedLog::kQuiet);
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--iterations=", 13) == 0) {
      iterations = std::atoll(argv[i] + 13);
    } else if (std::strncmp(argv[i], "--seconds=", 10) == 0) {
      seconds = std::atoll(argv[i] + 10);
    } else if (std::strncmp(argv[i], "--seed=", 7) == 0) {
      seed = std::strtoull(argv[i] + 7, nullptr, 10);
    } else {
      std::ifstream in(argv[i], std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read corpus file %s\n", argv[i]);
        return 2;
      }
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  for (const std::string& input : corpus) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  std::printf("replayed %zu corpus inputs; mutating with seed %llu\n", corpus.size(), seed);
  std::fflush(stdout);  // still in the log if a mutated input crashes the process
  std::mt19937_64 rng(seed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  long long done = 0;
  for (; done < iterations && std::chrono::steady_clock::now() < deadline; ++done) {
    std::string input = corpus[rng() % corpus.size()];
    Mutate(rng, corpus, &input);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  std::printf("ran %lld mutated inputs without a crash\n", done);
  return 0;
}

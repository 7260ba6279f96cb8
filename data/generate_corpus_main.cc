// generate_corpus OUT.txt [NUM_BYTES] [SEED]: writes English-like text
// (data/english_like_corpus.h). Defaults: 1000000 bytes, seed 1.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "data/english_like_corpus.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::cerr << "usage: generate_corpus OUT.txt [NUM_BYTES] [SEED]\n";
    return 2;
  }
  const long long num_bytes = argc > 2 ? std::atoll(argv[2]) : 1000000;
  const unsigned long long seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  if (num_bytes <= 0) {
    std::cerr << "generate_corpus: NUM_BYTES must be positive, got " << argv[2] << "\n";
    return 2;
  }
  const std::string text = zeroshard::GenerateEnglishLikeText(seed, num_bytes);
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "generate_corpus: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}

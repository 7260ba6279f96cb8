// text_to_tokens IN.txt OUT.bin: writes IN's bytes as an llm.c token file
// (vocab 256, token = byte value). Prints the token count.
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "data/byte_tokens.h"
#include "data/token_file.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: text_to_tokens IN.txt OUT.bin\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "text_to_tokens: cannot open " << argv[1] << "\n";
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const absl::Status s = zeroshard::WriteLlmcTokenFile(argv[2], zeroshard::BytesToTokens(text));
  if (!s.ok()) {
    std::cerr << "text_to_tokens: " << s << "\n";
    return 1;
  }
  std::cout << argv[2] << ": " << text.size() << " tokens (vocab " << zeroshard::kByteVocabSize << ")\n";
  return 0;
}

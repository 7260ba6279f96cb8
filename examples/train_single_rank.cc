// Trains GPT-2 on one rank on CPU with a plain loop (no engine).
//
//   train_single_rank                       # generated English-like corpus, byte vocab
//   train_single_rank --data=tokens.bin --vocab_size=50257 --n_layer=12 ...
//
// Prints one line per step: "step N loss L (ms)".
#include <chrono>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "data/byte_tokens.h"
#include "data/english_like_corpus.h"
#include "data/token_file.h"
#include "examples/train_single_rank_loop.h"

ABSL_FLAG(std::string, data, "", "llm.c token file; empty: generate an English-like byte corpus");
ABSL_FLAG(bool, raw_u16, false, "--data is a raw uint16 file (nanoGPT .bin) instead of llm.c's format");
ABSL_FLAG(int64_t, corpus_bytes, 1000000, "size of the generated corpus when --data is empty");
ABSL_FLAG(int, vocab_size, 256, "vocabulary size (256 for byte tokens)");
ABSL_FLAG(int, n_layer, 4, "GPT-2 layers");
ABSL_FLAG(int, n_head, 4, "attention heads");
ABSL_FLAG(int, n_embd, 128, "channels");
ABSL_FLAG(int, seq_len, 64, "tokens per sequence (also the position table size)");
ABSL_FLAG(int64_t, batch_size, 16, "sequences per optimizer step");
ABSL_FLAG(int64_t, accumulation_steps, 1, "micro-batches per step");
ABSL_FLAG(int64_t, steps, 300, "optimizer steps");
ABSL_FLAG(double, lr, 2e-3, "AdamW learning rate (peak)");
ABSL_FLAG(int64_t, warmup_steps, 20, "linear warmup steps");
ABSL_FLAG(double, final_lr_fraction, 0.1, "cosine decay ends at lr * this");
ABSL_FLAG(double, weight_decay, 0.1, "AdamW weight decay on matrices and embeddings");
ABSL_FLAG(uint64_t, seed, 1, "parameter init seed");
ABSL_FLAG(uint64_t, shuffle_seed, 1, "sequence order seed (0: file order)");
ABSL_FLAG(int, threads, 0, "CPU threads (0: cores / ranks)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<zeroshard::TokenDataset> dataset;
  if (absl::GetFlag(FLAGS_data).empty()) {
    const std::string text = zeroshard::GenerateEnglishLikeText(1, absl::GetFlag(FLAGS_corpus_bytes));
    dataset = zeroshard::TokenDataset::FromTokens(zeroshard::BytesToTokens(text), absl::GetFlag(FLAGS_vocab_size),
                                                  "generated corpus");
  } else {
    dataset = zeroshard::TokenDataset::Open(
        absl::GetFlag(FLAGS_data), absl::GetFlag(FLAGS_vocab_size),
        absl::GetFlag(FLAGS_raw_u16) ? zeroshard::TokenFileFormat::kRawU16 : zeroshard::TokenFileFormat::kLlmc);
  }
  if (!dataset.ok()) {
    std::fprintf(stderr, "train_single_rank: %s\n", dataset.status().ToString().c_str());
    return 1;
  }
  zeroshard::SingleRankTrainOptions opt;
  opt.model = zeroshard::Gpt2Config{absl::GetFlag(FLAGS_n_layer), absl::GetFlag(FLAGS_n_head),
                                    absl::GetFlag(FLAGS_n_embd), absl::GetFlag(FLAGS_vocab_size),
                                    absl::GetFlag(FLAGS_seq_len)};
  opt.seq_len = absl::GetFlag(FLAGS_seq_len);
  opt.batch_size = absl::GetFlag(FLAGS_batch_size);
  opt.accumulation_steps = absl::GetFlag(FLAGS_accumulation_steps);
  opt.steps = absl::GetFlag(FLAGS_steps);
  opt.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  opt.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  opt.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  opt.final_lr_fraction = static_cast<float>(absl::GetFlag(FLAGS_final_lr_fraction));
  opt.init_seed = absl::GetFlag(FLAGS_seed);
  opt.shuffle_seed = absl::GetFlag(FLAGS_shuffle_seed);
  opt.num_threads = absl::GetFlag(FLAGS_threads);
  auto last = std::chrono::steady_clock::now();
  auto losses = zeroshard::TrainSingleRank(*dataset, opt, [&](int64_t step, float loss) {
    const auto now = std::chrono::steady_clock::now();
    std::printf("step %lld loss %.4f (%.1f ms)\n", static_cast<long long>(step), loss,
                std::chrono::duration<double, std::milli>(now - last).count());
    std::fflush(stdout);
    last = now;
  });
  if (!losses.ok()) {
    std::fprintf(stderr, "train_single_rank: %s\n", losses.status().ToString().c_str());
    return 1;
  }
  return 0;
}

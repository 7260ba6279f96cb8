// Writes the inputs of ckpt_test.sh into OUT_DIR: fixture/ (a dp-4
// checkpoint root from checkpoint/testing), gpt2.safetensors (random full
// weights of a 1-layer GPT-2) and gpt2.pbtxt (its run config at dp 3). The
// random seeds are printed, so they are in the log of a failed test.
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/testing/checkpoint_fixture.h"
#include "core/file_io.h"
#include "nn/gpt2.h"

int main(int argc, char** argv) {
  using namespace zeroshard;
  if (argc != 2) {
    std::cerr << "usage: ckpt_test_fixture_main OUT_DIR\n";
    return 2;
  }
  const std::string out = argv[1];
  const uint32_t values_seed = std::random_device{}(), weights_seed = std::random_device{}();
  std::cout << "fixture values seed " << values_seed << ", gpt2 weights seed " << weights_seed << std::endl;
  const CheckpointManifest m = testing::FixtureManifest(4, 9);
  absl::StatusOr<std::string> dir =
      testing::WriteFixture(JoinPath(out, "fixture"), m, testing::RandomFlatValues(m, values_seed));
  if (!dir.ok()) {
    std::cerr << dir.status() << "\n";
    return 1;
  }
  Gpt2Config gc;
  gc.n_layer = 1;
  gc.n_head = 2;
  gc.n_embd = 8;
  gc.vocab_size = 13;
  gc.seq_len = 4;
  auto model = BuildGpt2(gc);
  std::mt19937 rng(weights_seed);
  std::vector<std::vector<float>> storage;
  std::vector<SafetensorsTensorData> tensors;
  storage.reserve(64);
  for (const auto& unit : (*model)->units) {
    for (const ParamSpec& p : unit->params()) {
      int64_t n = 1;
      for (int64_t d : p.shape) n *= d;
      storage.emplace_back(static_cast<size_t>(n));
      for (float& x : storage.back()) x = std::normal_distribution<float>()(rng);
      tensors.push_back({p.name, DType::kF32, p.shape, storage.back().data()});
    }
  }
  absl::Status s = WriteSafetensors(JoinPath(out, "gpt2.safetensors"), tensors, {}).status();
  if (s.ok()) {
    s = WriteFileDurably(JoinPath(out, "gpt2.pbtxt"),
                         {"model { n_layer: 1 n_head: 2 n_embd: 8 vocab_size: 13 seq_len: 4 }\n"
                          "data { train_path: \"train.bin\" batch_size: 6 }\n"
                          "engine { parallel { dp: 3 } zero { stage: 2 } }\n"});
  }
  if (!s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  return 0;
}

#include "engine/testing/global_batch.h"

namespace zeroshard {

std::vector<HostBatch> MicroBatchesForRank(const std::vector<int32_t>& tokens, int global_batch, int seq_len, int dp,
                                           int k, int rank) {
  const int T = seq_len, B = global_batch / (dp * k);
  std::vector<HostBatch> out(k);
  for (int m = 0; m < k; ++m) {
    HostBatch& hb = out[m];
    for (int b = 0; b < B; ++b) {
      const int j = m * dp * B + rank * B + b;
      const int32_t* seq = &tokens[static_cast<size_t>(j) * (T + 1)];
      hb.inputs.insert(hb.inputs.end(), seq, seq + T);
      hb.targets.insert(hb.targets.end(), seq + 1, seq + T + 1);
    }
    hb.view = Batch{{"inputs", TensorView{hb.inputs.data(), DType::kI32, {B, T}, Device::kCpu}},
                    {"targets", TensorView{hb.targets.data(), DType::kI32, {B, T}, Device::kCpu}}};
  }
  return out;
}

std::vector<Batch> Views(const std::vector<HostBatch>& batches) {
  std::vector<Batch> views;
  for (const HostBatch& hb : batches) views.push_back(hb.view);
  return views;
}

std::vector<int32_t> RandomTokens(uint32_t seed, int global_batch, int seq_len, int vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(static_cast<size_t>(global_batch) * (seq_len + 1));
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

}  // namespace zeroshard

#include "cli/check_config.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/args.h"
#include "engine/config_loader.h"
#include "engine/config_validation.h"
#include "google/protobuf/text_format.h"

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: zeroshard check-config FILE [--world-size N] [--set PATH=VALUE ...]\n"
    "\n"
    "Parses and validates a TrainConfig (.pbtxt). --set overrides one field\n"
    "after parsing (repeatable), e.g. --set engine.zero.stage=2. --world-size\n"
    "checks dp*tp*pp against N ranks (default: $OMPI_COMM_WORLD_SIZE if set).\n"
    "Prints a normalized summary and exits 0, or prints every error and exits 2.\n";

int Run(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argc, argv, 1, {{"world-size"}, {"set", true, true}, {"help", false}});
  if (!args.ok()) {
    std::cerr << "zeroshard check-config: " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  if (args->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (args->positional.size() != 1) {
    std::cerr << "zeroshard check-config: expected exactly one config file, got " << args->positional.size() << "\n"
              << kUsage;
    return 2;
  }
  int world_size = -1;
  std::string world_text = args->Get("world-size", std::getenv("OMPI_COMM_WORLD_SIZE") ? std::getenv("OMPI_COMM_WORLD_SIZE") : "");
  if (!world_text.empty() && (!absl::SimpleAtoi(world_text, &world_size) || world_size < 1)) {
    std::cerr << "zeroshard check-config: --world-size: '" << world_text << "' is not a positive integer\n";
    return 2;
  }
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(args->positional[0], args->GetAll("set"), world_size);
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return 2;
  }
  std::cout << ConfigSummary(*config, world_size);
  return 0;
}

}  // namespace

const Subcommand kCheckConfig = {"check-config", "validate a .pbtxt run config and print its normalized form",
                                 kUsage, Run};

long long Gpt2ParamCount(const ModelConfig& m) {
  const long long C = m.n_embd(), V = m.vocab_size(), T = m.seq_len(), L = m.n_layer();
  return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

std::string ConfigSummary(const TrainConfig& c, int world_size) {
  const EngineConfig& e = c.engine();
  const ParallelConfig& p = e.parallel();
  std::string out;
  absl::StrAppend(&out, "valid config",
                  world_size > 0 ? absl::StrCat(" for ", world_size, " ranks") : std::string(" (world size not checked)"),
                  "\n");
  absl::StrAppendFormat(&out, "model      GPT-2 n_layer=%d n_head=%d n_embd=%d vocab_size=%d seq_len=%d: %d parameters\n",
                        c.model().n_layer(), c.model().n_head(), c.model().n_embd(), c.model().vocab_size(),
                        c.model().seq_len(), Gpt2ParamCount(c.model()));
  absl::StrAppendFormat(&out, "parallel   dp=%d tp=%d pp=%d\n", p.dp(), p.tp(), p.pp());
  absl::StrAppendFormat(&out,
                        "batch      %d sequences/step = dp %d x accumulation %d x micro-batch %d; %d tokens/step\n",
                        c.data().batch_size(), p.dp(), e.gradient_accumulation_steps(), MicroBatchSize(c),
                        static_cast<long long>(c.data().batch_size()) * c.model().seq_len());
  absl::StrAppendFormat(&out, "zero       stage %d, prefetch %d, persistence_threshold %d, bucket_bytes %d\n",
                        e.zero().stage(), e.zero().prefetch(), e.zero().persistence_threshold(),
                        e.zero().bucket_bytes());
  absl::StrAppendFormat(&out, "precision  compute %s, master %s, reduce %s\n",
                        DTypeProto_Name(e.precision().compute_dtype()), DTypeProto_Name(e.precision().master_dtype()),
                        DTypeProto_Name(e.precision().reduce_dtype()));
  absl::StrAppendFormat(&out, "optimizer  %s lr %g weight_decay %g grad_clip %g, schedule %s\n",
                        OptimizerConfig::Type_Name(e.optimizer().type()), e.optimizer().lr(),
                        e.optimizer().weight_decay(), e.optimizer().grad_clip(),
                        LrScheduleConfig::Type_Name(e.lr_schedule().type()));
  absl::StrAppendFormat(&out, "training   %d steps, eval every %d, train data %s\n", c.steps(), c.eval_interval(),
                        c.data().train_path());
  std::string text;
  google::protobuf::TextFormat::PrintToString(c, &text);
  absl::StrAppend(&out, "--- normalized config ---\n", text);
  return out;
}

}  // namespace zeroshard::cli

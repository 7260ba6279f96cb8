#include "cli/ckpt.h"

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/args.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/consolidate.h"
#include "checkpoint/diff.h"
#include "checkpoint/import_weights.h"
#include "cli/run_config.h"
#include "models/registry.h"
#include "checkpoint/inspect.h"
#include "checkpoint/reshard.h"
#include "checkpoint/verify.h"

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: zeroshard ckpt COMMAND ...\n"
    "\n"
    "Each DIR is a checkpoint root (its 'latest' is followed) or a step_<N> directory.\n"
    "  inspect DIR                      summary: step, topology, units, parameters, bytes, scaler\n"
    "  verify DIR                       sizes, checksums, manifest consistency; exit 1 naming\n"
    "                                   the file and tensor at fault\n"
    "  consolidate DIR --out FILE.safetensors [--dtype f32|bf16|f16] [--optimizer]\n"
    "                                   the full model with Hugging Face GPT-2 names\n"
    "  reshard DIR --out DIR2 [--dp N] [--tp N] [--pp N]\n"
    "                                   the same checkpoint (optimizer state included) laid out\n"
    "                                   for another grid; unnamed axes keep their size\n"
    "  import FILE.safetensors --config C.pbtxt --out DIR\n"
    "                                   a step-0 checkpoint at the config's (dp, tp, pp) to start\n"
    "                                   training from full weights\n"
    "  diff DIR1 DIR2 [--tol T]         max absolute and relative difference per tensor (whole\n"
    "                                   tensors: the layouts may differ);\n"
    "                                   exit 1 when a max absolute difference exceeds T (default 0)\n"
    "Exit codes: 0 success, 1 a failed check, 2 bad usage or input.\n";

// kDataLoss is a failed check (1); anything else is bad input (2).
int Fail(const std::string& command, const absl::Status& s) {
  std::cerr << "zeroshard ckpt " << command << ": " << s.message() << "\n";
  return s.code() == absl::StatusCode::kDataLoss ? 1 : 2;
}

int Usage(const std::string& message) {
  std::cerr << "zeroshard ckpt: " << message << "\n" << kUsage;
  return 2;
}

absl::StatusOr<ParsedArgs> Parse(int argc, char** argv, size_t positional, const std::vector<FlagSpec>& flags) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argc, argv, 2, flags);
  if (!args.ok()) return args;
  if (args->positional.size() != positional) {
    return absl::InvalidArgumentError(absl::StrCat(argv[1], " takes ", positional, " positional argument",
                                                   positional == 1 ? "" : "s", ", got ", args->positional.size()));
  }
  return args;
}

int Inspect(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args = Parse(argc, argv, 1, {});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(args->positional[0]);
  if (!reader.ok()) return Fail("inspect", reader.status());
  std::cout << InspectCheckpoint(*reader);
  // How the model names its tensors, when this build registers it.
  const std::string& model = reader->manifest().config().model_name();
  if (!model.empty()) {
    absl::StatusOr<const ModelRegistration*> m = ModelRegistry::Global().Find(model);
    std::cout << "tensors:     " << (m.ok() ? (*m)->tensor_naming : std::string(m.status().message())) << "\n";
  }
  return 0;
}

int Verify(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args = Parse(argc, argv, 1, {});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  // No checkpoint at all is bad input (2); anything wrong inside one is a
  // failed check (1).
  absl::StatusOr<CheckpointReader> opened = CheckpointReader::Open(args->positional[0]);
  if (!opened.ok() && opened.status().code() != absl::StatusCode::kDataLoss &&
      opened.status().code() != absl::StatusCode::kUnimplemented) {
    return Fail("verify", opened.status());
  }
  const std::vector<absl::Status> problems = VerifyCheckpoint(args->positional[0]);
  for (const absl::Status& p : problems) std::cout << "FAIL " << p.message() << "\n";
  if (!problems.empty()) {
    std::cout << problems.size() << " problem(s) found\n";
    return 1;
  }
  std::cout << "OK " << opened->dir() << ": manifest and " << opened->manifest().files_size() << " shard file(s) intact\n";
  return 0;
}

int Consolidate(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args = Parse(argc, argv, 1, {{"out"}, {"dtype"}, {"optimizer", false}});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  if (!args->Has("out")) return Usage("consolidate needs --out FILE.safetensors");
  ConsolidateOptions options;
  const std::string dtype = args->Get("dtype", "f32");
  if (dtype == "f32") {
    options.dtype = DType::kF32;
  } else if (dtype == "bf16") {
    options.dtype = DType::kBF16;
  } else if (dtype == "f16") {
    options.dtype = DType::kF16;
  } else {
    return Usage(absl::StrCat("--dtype '", dtype, "' is not one of f32, bf16, f16"));
  }
  options.optimizer = args->Has("optimizer");
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(args->positional[0]);
  if (!reader.ok()) return Fail("consolidate", reader.status());
  absl::Status s = ConsolidateCheckpoint(*reader, args->Get("out"), options);
  if (!s.ok()) return Fail("consolidate", s);
  std::cout << "wrote " << args->Get("out") << " (step " << reader->manifest().step() << ", " << dtype << ")\n";
  return 0;
}

int Reshard(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args = Parse(argc, argv, 1, {{"out"}, {"dp"}, {"tp"}, {"pp"}});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  if (!args->Has("out") || !(args->Has("dp") || args->Has("tp") || args->Has("pp"))) {
    return Usage("reshard needs --out DIR2 and at least one of --dp N, --tp N, --pp N");
  }
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(args->positional[0]);
  if (!reader.ok()) return Fail("reshard", reader.status());
  const CheckpointTopology& saved = reader->manifest().topology();
  // Unnamed axes keep their size.
  GridShape target{saved.dp(), saved.tp(), saved.pp()};
  for (const auto& [flag, size] : {std::pair<const char*, int*>{"dp", &target.dp}, {"tp", &target.tp},
                                   {"pp", &target.pp}}) {
    if (!args->Has(flag)) continue;
    absl::StatusOr<long long> n = args->GetInt(flag, 0);
    if (!n.ok() || *n < 1 || *n > (1 << 20)) {
      return Usage(absl::StrCat("--", flag, " '", args->Get(flag), "' must be >= 1"));
    }
    *size = static_cast<int>(*n);
  }
  absl::StatusOr<std::string> dir = ReshardCheckpoint(*reader, args->Get("out"), target);
  if (!dir.ok()) return Fail("reshard", dir.status());
  std::cout << "wrote " << *dir << " (dp " << saved.dp() << " tp " << saved.tp() << " pp " << saved.pp()
            << " -> dp " << target.dp << " tp " << target.tp << " pp " << target.pp << ")\n";
  return 0;
}

int Import(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args = Parse(argc, argv, 1, {{"config"}, {"out"}, {"set", true, true}});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  if (!args->Has("config") || !args->Has("out")) return Usage("import needs --config C.pbtxt and --out DIR");
  // Any registered model's run config (models/registry.h).
  absl::StatusOr<RunConfig> config = LoadRunConfig(args->Get("config"), args->GetAll("set"), -1);
  if (!config.ok()) return Fail("import", config.status());
  absl::StatusOr<std::unique_ptr<Model>> model = config->build_model();
  if (!model.ok()) return Fail("import", model.status());
  absl::StatusOr<std::string> dir = ImportCheckpoint(args->positional[0], **model, config->record, args->Get("out"));
  if (!dir.ok()) return Fail("import", dir.status());
  const ParallelConfig& par = config->engine.parallel();
  std::cout << "wrote " << *dir << " (dp " << par.dp() << " tp " << par.tp() << " pp " << par.pp() << ", step 0)\n";
  return 0;
}

int Diff(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args = Parse(argc, argv, 2, {{"tol"}});
  if (!args.ok()) return Usage(std::string(args.status().message()));
  double tol = 0;
  if (args->Has("tol") && (!absl::SimpleAtod(args->Get("tol"), &tol) || !(tol >= 0))) {
    return Usage(absl::StrCat("--tol '", args->Get("tol"), "' is not a number >= 0"));
  }
  absl::StatusOr<CheckpointReader> a = CheckpointReader::Open(args->positional[0]);
  if (!a.ok()) return Fail("diff", a.status());
  absl::StatusOr<CheckpointReader> b = CheckpointReader::Open(args->positional[1]);
  if (!b.ok()) return Fail("diff", b.status());
  absl::StatusOr<std::vector<TensorDiff>> diffs = DiffCheckpoints(*a, *b);
  if (!diffs.ok()) {
    std::cerr << "zeroshard ckpt diff: " << diffs.status().message() << "\n";
    return diffs.status().code() == absl::StatusCode::kFailedPrecondition ? 1 : Fail("diff", diffs.status());
  }
  int above = 0;
  std::cout << absl::StrFormat("%-40s %-11s %10s %12s %12s\n", "tensor", "kind", "numel", "max_abs", "max_rel");
  for (const TensorDiff& d : *diffs) {
    const bool bad = !(d.max_abs <= tol);
    above += bad;
    std::cout << absl::StrFormat("%-40s %-11s %10d %12.4g %12.4g%s\n", d.name, d.kind, d.numel, d.max_abs, d.max_rel,
                                 bad ? "  ABOVE TOL" : "");
  }
  std::cout << absl::StrFormat("%d of %d tensors differ by more than %g\n", above, diffs->size(), tol);
  return above > 0 ? 1 : 0;
}

int Run(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    (argc < 2 ? std::cerr : std::cout) << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "inspect") return Inspect(argc, argv);
  if (command == "verify") return Verify(argc, argv);
  if (command == "consolidate") return Consolidate(argc, argv);
  if (command == "reshard") return Reshard(argc, argv);
  if (command == "import") return Import(argc, argv);
  if (command == "diff") return Diff(argc, argv);
  return Usage(absl::StrCat("no ckpt command '", command, "'"));
}

}  // namespace

const Subcommand kCkpt = {"ckpt", "inspect, verify, consolidate, reshard, import or diff sharded checkpoints", kUsage,
                          Run};

}  // namespace zeroshard::cli

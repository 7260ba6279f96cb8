// One `zeroshard` subcommand: its name, one-line summary, usage text and
// entry point. Entry points return the process exit code: 0 success,
// 1 a failed check (e.g. a corrupt checkpoint), 2 bad usage or input.
#ifndef ZEROSHARD_CLI_SUBCOMMAND_H_
#define ZEROSHARD_CLI_SUBCOMMAND_H_

namespace zeroshard::cli {

struct Subcommand {
  const char* name;
  const char* summary;
  const char* usage;
  // argv[0] is the subcommand name.
  int (*run)(int argc, char** argv);
};

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_SUBCOMMAND_H_

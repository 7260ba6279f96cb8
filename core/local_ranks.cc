#include "core/local_ranks.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace zeroshard {
namespace {

std::optional<int> PositiveInt(absl::string_view text) {
  int n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < 1) return std::nullopt;
  return n;
}

std::optional<int> PositiveEnv(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr) return std::nullopt;
  return PositiveInt(v);
}

}  // namespace

std::optional<int> SlurmTasksOnNode(const std::string& tasks_per_node, int node) {
  if (node < 0) return std::nullopt;
  int first_node = 0;
  for (absl::string_view entry : absl::StrSplit(tasks_per_node, ',')) {
    absl::string_view count_text = entry;
    int repeat = 1;
    const size_t open = entry.find("(x");
    if (open != absl::string_view::npos) {
      if (entry.back() != ')') return std::nullopt;
      count_text = entry.substr(0, open);
      std::optional<int> r = PositiveInt(entry.substr(open + 2, entry.size() - open - 3));
      if (!r) return std::nullopt;
      repeat = *r;
    }
    std::optional<int> count = PositiveInt(count_text);
    if (!count) return std::nullopt;
    if (node < first_node + repeat) return count;
    first_node += repeat;
  }
  return std::nullopt;
}

std::optional<int> LocalRanksFromEnvironment() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::optional<int> n = PositiveEnv(var)) return n;
  }
  const char* step_tasks = std::getenv("SLURM_STEP_TASKS_PER_NODE");
  const char* node_id = std::getenv("SLURM_NODEID");
  int node = 0;
  if (step_tasks != nullptr && node_id != nullptr && absl::SimpleAtoi(node_id, &node)) {
    if (std::optional<int> n = SlurmTasksOnNode(step_tasks, node)) return n;
  }
  if (const char* v = std::getenv("SLURM_NTASKS_PER_NODE")) {
    // Slurm may write "4(x2)": every node runs the leading count.
    return SlurmTasksOnNode(v, 0);
  }
  return std::nullopt;
}

}  // namespace zeroshard

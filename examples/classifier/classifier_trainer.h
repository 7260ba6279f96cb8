// The classifier example's training job behind train_classifier: config,
// MPI world, process grid, engine, generated data, the step loop and the
// held-out evaluation. Every rank runs RunClassifierTraining; rank 0
// prints progress.
#ifndef ZEROSHARD_EXAMPLES_CLASSIFIER_CLASSIFIER_TRAINER_H_
#define ZEROSHARD_EXAMPLES_CLASSIFIER_CLASSIFIER_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zeroshard {

struct ClassifierFlags {
  std::string config_path;
  std::vector<std::string> overrides;  // --set PATH=VALUE, in order
  int64_t steps = -1;                  // optimizer steps of this job; -1: the config's
};

// Collective over MPI_COMM_WORLD. Errors every rank sees alike (a bad
// config) come back on every rank. Rank 0 writes to `out`:
//   step N/TOTAL | loss X.XXXX | train accuracy ... (step 1, every
//       engine.logging.interval steps, the last step)
//   held-out loss X.XXXX over E examples
//   final loss X.XXXX     (the last step's training loss; the held-out
//                          loss when no step ran)
//   accuracy Y.YYYY       (Evaluate's "accuracy" on the held-out split)
absl::Status RunClassifierTraining(const ClassifierFlags& flags, std::ostream& out);

}  // namespace zeroshard

#endif  // ZEROSHARD_EXAMPLES_CLASSIFIER_CLASSIFIER_TRAINER_H_

#include "nn/unit.h"

namespace zeroshard {

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace zeroshard

// The process's heap policy for training (glibc malloc).
//
// A training step allocates and frees the same large host buffers every
// step: gathered parameters, full gradients, logits, Open MPI's collective
// temporaries. Under glibc's defaults each one above the mmap threshold is a
// fresh mapping whose pages the kernel faults in, zeroed, on first touch, and
// freed heap above the trim threshold goes back to the OS; at dp 2 on a
// 124M-wide model that was a quarter to a third of the step (docs/model.md,
// "Host memory"). KeepFreedHostMemory serves every request from the heap and never
// trims it, so from the second step on the step's pages are reused, as a
// caching allocator does on a GPU. The resident size then stays at the
// process's peak, which the memory plan's measured peak (VmHWM) reports
// either way. Setting MALLOC_MMAP_MAX_, MALLOC_MMAP_THRESHOLD_ or
// MALLOC_TRIM_THRESHOLD_ in the environment keeps glibc's handling of that
// setting. Idempotent; thread-safe.
#ifndef ZEROSHARD_CORE_HOST_HEAP_H_
#define ZEROSHARD_CORE_HOST_HEAP_H_

namespace zeroshard {

void KeepFreedHostMemory();

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_HOST_HEAP_H_

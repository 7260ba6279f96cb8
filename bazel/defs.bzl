"""Build macros shared by every zeroshard package.

zs_cc_library / zs_cc_test keep copts in one place; cuda_library compiles .cu
files with nvcc; mpi_test runs one gtest binary under mpirun at several world
sizes.
"""

load("@local_cuda//:defs.bzl", "NVCC")

ZS_COPTS = []

def zs_cc_library(name, deps = [], copts = [], **kwargs):
    native.cc_library(
        name = name,
        deps = deps,
        copts = ZS_COPTS + copts,
        **kwargs
    )

def zs_cc_binary(name, deps = [], copts = [], **kwargs):
    native.cc_binary(
        name = name,
        deps = deps,
        copts = ZS_COPTS + copts,
        **kwargs
    )

def zs_cc_test(name, deps = [], copts = [], size = "small", **kwargs):
    """A single-process gtest; links gtest_main unless deps bring a main."""
    native.cc_test(
        name = name,
        deps = deps + ["//third_party:gtest_main"],
        copts = ZS_COPTS + copts,
        size = size,
        **kwargs
    )

# sm_90 SASS for Hopper plus compute_90 PTX so newer GPUs JIT it.
NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler",
    "-fPIC",
    "--expt-relaxed-constexpr",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-gencode",
    "arch=compute_90,code=compute_90",
]

def cuda_library(name, srcs, hdrs = [], cu_deps_hdrs = [], deps = [], **kwargs):
    """Compiles each .cu in srcs with nvcc into an object linked by a cc_library.

    With --//bazel:cuda=false (default where nvcc is missing) the library is
    an empty stub: callers compile their CUDA paths only under
    ZEROSHARD_HAS_CUDA, which this library defines for its dependents.
    """
    objs = []
    for src in srcs:
        obj = "_%s_%s.o" % (name, src.replace("/", "_").replace(".cu", ""))
        native.genrule(
            name = obj.replace(".o", "_nvcc"),
            srcs = [src] + hdrs + cu_deps_hdrs,
            outs = [obj],
            cmd = "%s -c $(location %s) -o $@ -I. -I$(GENDIR) %s" % (NVCC, src, " ".join(NVCC_FLAGS)),
            tags = ["manual"],
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = select({
            "//bazel:cuda_enabled": objs,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        defines = select({
            "//bazel:cuda_enabled": ["ZEROSHARD_HAS_CUDA=1"],
            "//conditions:default": [],
        }),
        deps = deps + select({
            "//bazel:cuda_enabled": ["@local_cuda//:cudart"],
            "//conditions:default": [],
        }),
        **kwargs
    )

def mpi_test(name, srcs, deps = [], ranks = [1, 2, 3, 4], size = "medium", copts = [], data = [], args = [], **kwargs):
    """One gtest binary run under `mpirun -np N` for each N in ranks.

    Targets are name_np1, name_np2, ...; each rank writes its own gtest XML and
    bazel/mpi_test.sh merges them so a test fails if it failed on any rank.
    The binary links //tests:mpi_test_main (MPI_Init + quiet non-zero ranks).
    """
    binary = name + "_bin"
    native.cc_binary(
        name = binary,
        srcs = srcs,
        deps = deps + ["//tests:mpi_test_main"],
        copts = ZS_COPTS + copts,
        testonly = True,
        tags = ["manual"],
    )
    for n in ranks:
        native.sh_test(
            name = "%s_np%d" % (name, n),
            srcs = ["//bazel:mpi_test.sh"],
            args = [str(n), "$(location :%s)" % binary, "$(location //bazel:merge_test_xml.py)"] + args,
            data = [":" + binary, "//bazel:merge_test_xml.py"] + data,
            size = size,
            # Several ranks each spin a CPU: never run two MPI tests at once.
            tags = ["exclusive", "mpi"],
            **kwargs
        )

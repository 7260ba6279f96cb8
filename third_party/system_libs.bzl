"""Repository rules that expose system-installed CUDA and Open MPI to Bazel.

Nothing is downloaded: both rules look at the machine and symlink what they
find. Without nvcc, @local_cuda still exists but says HAS_CUDA = False so the
CUDA targets are skipped instead of failing.
"""

def _which_dir(ctx, tool):
    path = ctx.which(tool)
    if path == None:
        return None
    return path.dirname

def _cuda_root(ctx):
    env_root = ctx.os.environ.get("CUDA_PATH", "")
    if env_root and ctx.path(env_root + "/bin/nvcc").exists:
        return ctx.path(env_root)
    nvcc = ctx.which("nvcc")
    if nvcc == None:
        return None

    # Resolve /usr/local/cuda -> /usr/local/cuda-13.0 style links.
    result = ctx.execute(["readlink", "-f", str(nvcc)])
    real = ctx.path(result.stdout.strip()) if result.return_code == 0 else nvcc
    return real.dirname.dirname

def _cuda_repository_impl(ctx):
    root = _cuda_root(ctx)
    if root == None:
        ctx.file("defs.bzl", "HAS_CUDA = False\nNVCC = \"\"\n")
        ctx.file("BUILD", "exports_files([\"defs.bzl\"])\n")
        return
    ctx.symlink(root.get_child("include"), "include")
    lib = root.get_child("lib64") if root.get_child("lib64").exists else root.get_child("lib")
    ctx.symlink(lib, "lib")
    ctx.file("defs.bzl", "HAS_CUDA = True\nNVCC = \"%s\"\n" % root.get_child("bin").get_child("nvcc"))
    ctx.template("BUILD", ctx.attr.build_file, {"%{lib}": str(lib.realpath)})

cuda_repository = repository_rule(
    implementation = _cuda_repository_impl,
    attrs = {"build_file": attr.label(allow_single_file = True)},
    environ = ["CUDA_PATH", "PATH"],
    local = True,
)

def _showme(ctx, what):
    result = ctx.execute(["mpicxx", "--showme:" + what])
    if result.return_code != 0:
        fail("mpicxx --showme:%s failed (is libopenmpi-dev installed? run tools/install-deps): %s" % (what, result.stderr))
    return [w for w in result.stdout.replace("\n", " ").split(" ") if w]

def _mpi_repository_impl(ctx):
    if ctx.which("mpicxx") == None:
        fail("mpicxx not found: run tools/install-deps (needs libopenmpi-dev)")
    includes = []
    for i, d in enumerate(_showme(ctx, "incdirs")):
        ctx.symlink(d, "include%d" % i)
        includes.append("include%d" % i)
    linkopts = []
    for d in _showme(ctx, "libdirs"):
        linkopts += ["-L" + d, "-Wl,-rpath," + d]
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "mpi",
    hdrs = glob([{globs}]),
    includes = {includes},
    defines = ["OMPI_SKIP_MPICXX"],
    linkopts = {linkopts} + ["-lmpi"],
)
""".format(
        globs = ", ".join(['"%s/**/*.h"' % i for i in includes]),
        includes = repr(includes),
        linkopts = repr(linkopts),
    ))

mpi_repository = repository_rule(
    implementation = _mpi_repository_impl,
    environ = ["PATH"],
    local = True,
)

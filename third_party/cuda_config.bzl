"""Helpers for GPU-only targets: those that need a CUDA LibTorch (@libtorch//:libtorch_cuda).

They build with `--config=cuda` (.bazelrc: --define=ember_cuda=1) and EMBER_LIBTORCH set
to a CUDA LibTorch (see third_party/libtorch.bzl); without the config they are
incompatible, so `bazel build //...` and `bazel test //...` skip them.

    cc_test(name = "x_test", ..., target_compatible_with = cuda_only())
"""

def cuda_only():
    return select({
        "@cuda//:cuda_config": [],
        "//conditions:default": ["@cuda//:requires_cuda_config"],
    })

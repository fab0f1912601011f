"""Ember's Bazel conventions: one cc_library per header/source pair, one cc_test per *_test.cc.

    load("//:ember.bzl", "ember_cc_library", "ember_cc_test")

    ember_cc_library(name = "kv_store", deps = ["//common:status"])
        # srcs = ["kv_store.cc"] (when it exists), hdrs = ["kv_store.h"]
    ember_cc_test(name = "kv_store_test", deps = [":kv_store"])
        # srcs = ["kv_store_test.cc"], Catch2's main linked, size "small"

    ember_cc_library(name = "loader", public = True, deps = [...])
        # hdrs = ["include/ember/loader.h"], included as "ember/loader.h"

    ember_cc_fuzz(name = "idx_fuzz", deps = [":idx"])
        # a libFuzzer target of idx_fuzz.cc and idx_fuzz_test, which replays
        # testdata/fuzz/idx_fuzz/* (see docs/fuzzing.md)

Other attributes pass through to cc_library / cc_test unchanged.
"""

# Who may depend on emberd's libraries: the daemon itself and the layers above every
# other (benchmarks, end-to-end tests); never the SDK or the tools (docs/design.md,
# "Layering rule").
DAEMON_VISIBILITY = [
    "//bench:__subpackages__",
    "//daemon:__subpackages__",
    "//tests:__subpackages__",
]

def ember_cc_library(name, srcs = None, hdrs = None, public = False, **kwargs):
    """A cc_library of `name`.h and, when it exists, `name`.cc.

    public: the header is a public one, include/ember/`name`.h, included as "ember/`name`.h".
    """
    if public:
        kwargs["strip_include_prefix"] = "include"
    native.cc_library(
        name = name,
        srcs = native.glob([name + ".cc"]) if srcs == None else srcs,
        hdrs = ([("include/ember/" if public else "") + name + ".h"]) if hdrs == None else hdrs,
        **kwargs
    )

def ember_cc_test(name, srcs = None, deps = [], size = "small", **kwargs):
    """A Catch2 cc_test of `name`.cc."""
    native.cc_test(
        name = name,
        size = size,
        srcs = [name + ".cc"] if srcs == None else srcs,
        deps = deps + ["//third_party:catch2_main"],
        **kwargs
    )

def ember_cc_fuzz(name, srcs = None, deps = [], **kwargs):
    """A libFuzzer target of `name`.cc and `name`_test, the regression test of its corpus.

    `name`.cc defines LLVMFuzzerTestOneInput; its corpus (seeds and every input that
    once crashed it) is the directory testdata/fuzz/`name`/ of the package. Creates:
      `name`_target  a cc_library of the target's code (alwayslink).
      `name`         a cc_binary (tagged manual and ember_fuzz): with --config=fuzz
                     (.bazelrc, clang; tools/fuzz builds it) linked with libFuzzer,
                     otherwise with //common:fuzz_replay_main, replaying the files it is
                     given.
      `name`_test    a cc_test (GCC, part of //...) running the target once on every
                     file of the corpus.
    Other attributes pass through to the cc_library.
    """
    corpus = "testdata/fuzz/" + name
    native.cc_library(
        name = name + "_target",
        testonly = True,
        srcs = [name + ".cc"] if srcs == None else srcs,
        deps = deps,
        alwayslink = True,
        **kwargs
    )
    native.cc_binary(
        name = name,
        testonly = True,
        deps = [":" + name + "_target"] + select({
            "//:fuzzing": [],
            "//conditions:default": ["//common:fuzz_replay_main"],
        }),
        linkopts = select({
            "//:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = ["manual", "ember_fuzz"],
    )
    native.cc_test(
        name = name + "_test",
        size = "small",
        deps = [":" + name + "_target", "//common:fuzz_replay_main"],
        data = native.glob([corpus + "/*"]),
        args = [native.package_name() + "/" + corpus],
    )

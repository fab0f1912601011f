"""Ember's Bazel conventions: one cc_library per header/source pair, one cc_test per *_test.cc.

    load("//:ember.bzl", "ember_cc_library", "ember_cc_test")

    ember_cc_library(name = "kv_store", deps = ["//common:status"])
        # srcs = ["kv_store.cc"] (when it exists), hdrs = ["kv_store.h"]
    ember_cc_test(name = "kv_store_test", deps = [":kv_store"])
        # srcs = ["kv_store_test.cc"], Catch2's main linked, size "small"

    ember_cc_library(name = "loader", public = True, deps = [...])
        # hdrs = ["include/ember/loader.h"], included as "ember/loader.h"

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

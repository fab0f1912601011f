"""Ember's Bazel conventions: one cc_library per header/source pair, one cc_test per *_test.cc.

    load("//:ember.bzl", "ember_cc_library", "ember_cc_test")

    ember_cc_library(name = "kv_store", deps = ["//common:status"])
        # srcs = ["kv_store.cc"] (when it exists), hdrs = ["kv_store.h"]
    ember_cc_test(name = "kv_store_test", deps = [":kv_store"])
        # srcs = ["kv_store_test.cc"], Catch2's main linked, size "small"

Other attributes pass through to cc_library / cc_test unchanged.
"""

def ember_cc_library(name, srcs = None, hdrs = None, **kwargs):
    """A cc_library of `name`.h and, when it exists, `name`.cc."""
    native.cc_library(
        name = name,
        srcs = native.glob([name + ".cc"]) if srcs == None else srcs,
        hdrs = [name + ".h"] if hdrs == None else hdrs,
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

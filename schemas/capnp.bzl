"""C++ code generated from a Cap'n Proto schema of this package.

    load("//schemas:capnp.bzl", "capnp_cc_library")

    capnp_cc_library(name = "peer_capnp", src = "peer.capnp")
        # genrule peer_capnp_gen runs capnpc-c++; cc_library peer_capnp, included as
        # "schemas/peer.capnp.h"
"""

def capnp_cc_library(name, src, imports = [], deps = [], **kwargs):
    """A cc_library `name` of the code capnpc-c++ generates from `src`.

    imports: schema files of this package that `src` imports as "/<package>/<file>"
    (absolute, so the generated code includes "<package>/<file>.h"); deps: their
    capnp_cc_library targets.
    """
    package = native.package_name()
    native.genrule(
        name = name + "_gen",
        srcs = [src] + imports,
        outs = [src + ".h", src + ".c++"],
        cmd = ("capnp compile -I. -o/usr/bin/capnpc-c++:$(RULEDIR) --src-prefix=" + package +
               " $(location " + src + ")"),
    )
    native.cc_library(
        name = name,
        srcs = [src + ".c++"],
        hdrs = [src + ".h"],
        include_prefix = package,
        deps = ["//third_party:capnp"] + deps,
        **kwargs
    )

"""The console commands a wheel installs (emberd, emberctl, ember-run): each runs the
native program the wheel carries in ember/bin."""

import os
import sys


def _run(name: str) -> None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.access(path, os.X_OK):
        sys.exit(f"{name}: this ember package carries no {path} (it was not installed "
                 f"from a wheel built by //sdk/python:wheel)")
    os.execv(path, [name] + sys.argv[1:])


def emberd() -> None:
    _run("emberd")


def emberctl() -> None:
    _run("emberctl")


def ember_run() -> None:
    _run("ember-run")

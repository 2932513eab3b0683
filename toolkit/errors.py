"""Errors that own their message and exit code; the CLI maps them in one place.

Exit codes (stable, documented in the README):
  0 ok, 1 unexpected error, 2 build failed, 3 bench failed, 4 bad input,
  5 Docker engine unavailable, 6 compare found a regression, 7 results did not reproduce.
"""

from __future__ import annotations


class ToolkitError(Exception):
    """Base class: `str(err)` is the user-facing message; `exit_code` the process exit status."""

    exit_code = 1


class BadInput(ToolkitError):
    """matrix.yaml, a template, a model file or a command-line value is wrong (exit 4)."""

    exit_code = 4


class BuildFailed(ToolkitError):
    """One or more image builds failed (exit 2)."""

    exit_code = 2


class BenchFailed(ToolkitError):
    """One or more benchmark runs failed (exit 3)."""

    exit_code = 3


class EngineUnavailable(ToolkitError):
    """The Docker engine cannot be reached (not running, socket permission denied) (exit 5)."""

    exit_code = 5


class Regression(ToolkitError):
    """`toolkit compare` found a slowdown beyond the threshold (exit 6)."""

    exit_code = 6


class NotReproduced(ToolkitError):
    """`toolkit reproduce` found deltas beyond noise (exit 7)."""

    exit_code = 7

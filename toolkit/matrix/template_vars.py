"""Template variables of matrix.yaml's images (`images[].vars`): the shape each one must have before
it is rendered into a Dockerfile, and the checks every value rendered into a Dockerfile, label or
command line passes (one line, no shell or Dockerfile metacharacters). Used by toolkit.matrix.schema's
ImageSpec; split out of it (the schema file stays under the 800-line limit).
"""

from __future__ import annotations

import re
from typing import Any

# Values that end up in Dockerfiles, labels and command lines: one line, no shell or Dockerfile
# metacharacters. Anything else is rejected here, before a build starts.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:/@+=%~^-]*$")


def check_safe(value: str, what: str) -> str:
    """`value` unchanged, or ValueError naming `what` and the characters allowed."""
    if not _SAFE_VALUE.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} contains characters that are not allowed (newline, quote, space, $, ;, "
            "backtick, ...); use only letters, digits and _ . , : / @ + = % ~ ^ -"
        )
    return value


TEMPLATE_VARS: dict[str, tuple[str, str]] = {
    "gfx_targets": ("gfx-list", "a non-empty list of AMD GPU targets, e.g. [gfx1201]"),
    "cmake_args": ("str-list", "a list of cmake flags, e.g. ['-DGGML_NATIVE=OFF'] (or [])"),
    "max_jobs": ("count", "a whole number of parallel compile jobs, e.g. 4"),
    "kv_cache_gib": ("count", "a whole number of GiB, e.g. 4"),
    # an image may lower the matrix's Mesa floor (the A/B image on Debian's own Mesa, matrix.yaml)
    "min_mesa_version": ("version", "a Mesa version floor, quoted, e.g. '25.2.0'"),
    "require_coopmat": ("bool", "true (the build fails without cooperative matrix) or false (recorded only)"),
    "mesa_apt_suite": ("apt-suite", "the base image's Debian release (trixie) or its -backports suite"),
    "vulkan_probe_extensions": (
        "str-list",
        "a list of Vulkan extension names, e.g. [VK_KHR_cooperative_matrix]",
    ),
}
"""Template variables whose shape the templates rely on: name -> (kind, what to write). Every other
variable is one line of text (a version, an image reference, a commit), a whole number, or a list of
text; a float is refused (`7.20` would render as 7.2: quote it), so is a boolean (it renders as
True/False; but a `bool` above), a date (YAML reads an unquoted 2026-02-28 as one: quote it) or a mapping."""


MAX_TEMPLATE_INT = 1 << 20
HOST = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
"""A registry host of the image reference grammar: dot-separated labels, each starting and ending with
a letter or digit (an IPv4 address is one; an [IPv6] one is not: Podman's grammar has none)."""
_IMAGE_REF = re.compile(
    # distribution's reference grammar (github.com/distribution/reference, regexp.go): an optional
    # registry host[:port], lowercase path components, an optional tag, an optional digest
    rf"^(?:{HOST}(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
IMAGE_REF_WANT = "an image reference, e.g. debian:trixie-slim or rocm/dev-ubuntu-24.04:7.2.1@sha256:<64 hex>"


_GFX = re.compile(r"^gfx[0-9a-f]{3,5}$")
_KIND_OK = {  # the kinds one predicate checks
    "image-ref": lambda v: isinstance(v, str) and len(v) <= 255 and bool(_IMAGE_REF.match(v)),
    "bool": lambda v: isinstance(v, bool),
    "version": lambda v: isinstance(v, str) and bool(re.fullmatch(r"[0-9]+(\.[0-9]+){1,3}", v)),
    "apt-suite": lambda v: isinstance(v, str) and bool(re.fullmatch(r"[a-z][a-z0-9]*(-backports)?", v)),
}


def check_template_var(key: str, val: Any) -> None:
    """ValueError naming template variable `key`, what it is and what to write, when `val` is not of
    the kind the templates use it as (TEMPLATE_VARS, else one line of text or a whole number)."""
    kind, want = TEMPLATE_VARS.get(
        key,
        ("scalar", "text (quote versions and dates: '7.2', '2026-02-28'), a whole number or a list of text"),
    )
    if key.endswith("base_image"):  # a template's FROM: `FROM  AS build` or `FROM ['a'] ...` is no image
        kind, want = "image-ref", IMAGE_REF_WANT
    got = excerpt(val, 40)
    bad = ValueError(f"template variable {key!r} is {got}: expected {want}")
    if kind in _KIND_OK:
        if not _KIND_OK[kind](val):
            raise bad
        return
    if kind == "scalar" and isinstance(val, list):
        kind = "str-list"
    if kind in ("gfx-list", "str-list"):
        if not isinstance(val, list) or (kind == "gfx-list" and not val):
            raise bad
        for item in val:
            if not isinstance(item, str):
                raise ValueError(
                    f"template variable {key!r}: item {excerpt(item, 40)} is not text: expected {want}"
                )
            if kind == "gfx-list" and not _GFX.fullmatch(item):
                raise ValueError(
                    f"template variable {key!r}: {item!r} is not an AMD GPU target: expected {want}"
                )
            check_safe(item, f"template variable {key!r} value")
        return
    if isinstance(val, bool) or not isinstance(val, str | int):
        raise bad
    if isinstance(val, int):
        low = 1 if kind == "count" else 0
        if not low <= val <= MAX_TEMPLATE_INT:
            raise ValueError(
                f"template variable {key!r} is {got}: expected a whole number from {low} to {MAX_TEMPLATE_INT}"
            )
        return
    if kind == "count":
        raise bad
    check_safe(val, f"template variable {key!r} value")


def excerpt(value: Any, limit: int = 80) -> str:
    """repr of a value, cut to `limit` characters (an input may be huge; never echo all of it)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"

"""The columns a llama-bench `-o md` table leaves out, and when the toolkit may say what they held.

llama-bench's markdown printer leaves a column out when every row holds its default
(markdown_printer::print_header). What that default is depends on the build that printed the table:
a default is filled in (`fill`) only where the table shows a build that has it, else the field stays
unknown and the row says so (`NO_BATCH_SIZES`, a note the import repeats with its reason).
"""

from __future__ import annotations

from typing import Any

MD_OMITTED_DEFAULTS: dict[str, Any] = {
    "n_batch": 2048,
    "n_ubatch": 512,
    "type_k": "f16",
    "type_v": "f16",
    "n_cpu_moe": 0,
    "split_mode": "layer",
    "main_gpu": 0,
    "no_kv_offload": False,
    "cpu_mask": "0x0",
    "cpu_strict": False,
    "poll": 50,
    "embeddings": False,
}
"""Columns llama-bench's markdown printer leaves out when every row holds the default, with that
default as its JSON output writes it (tools/llama-bench/llama-bench.cpp at 0c1e57098:
markdown_printer::print_header, cmd_params_defaults). flash_attn (false, then auto) and n_gpu_layers
(99, then -1) changed later and the host's thread count is the host's: those stay unknown when a table
leaves them out. n_batch and n_ubatch hold these values from MICRO_BATCH_BUILD on only (`fill`); the
options added after it (n_cpu_moe, cpu_mask, cpu_strict, poll, embeddings) are filled with the value
llama-bench writes when the option is not given: a build from before an option ran without it."""

MICRO_BATCH_BUILD = 2413
"""The first llama.cpp build whose llama-bench has a micro-batch (n_ubatch, default 512) and whose
n_batch default is 2048 (it was 512, and no n_ubatch existed): ggml-org/llama.cpp PR #6017 "llama : add
pipeline parallelism support" (merged 2024-03-13 as commit f30ea47a; its squash message ends "reduce
default n_batch to 2048"). Its build number is in the CI log of that commit (github.com/ggml-org/ci,
llama.cpp/f3/<rest of the hash>/ggml-2-x86-cpu/open_llama_3b_v2-tg-q4_0.log): `main: build = 2413
(f30ea47a)`. A table of an earlier build (`build: 5a7d312 (1879)`, tests written `pp 512`) ran with
n_batch 512 and no micro-batch."""

KNOWN_COMMITS = ("0c1e57098bba43ac29e6e3b677cdceebdd22334f",)
"""llama.cpp commits whose defaults MD_OMITTED_DEFAULTS are (matrix.yaml's pin): a table of one of them
is known whatever its build number says (a build made without git history prints `(0)` or `(1)`)."""

NO_BATCH_SIZES = "no batch sizes"
"""The note of an md row whose n_batch and n_ubatch stay unknown (flag `no-batch-sizes`)."""

NOTE_REASONS = {
    NO_BATCH_SIZES: (
        "n_ubatch, and n_batch where the table has no n_batch column, are unknown: the table leaves them out "
        "(they held the build's defaults) and nothing in it (a build line, an n_ubatch or fa column, a depth "
        f"test) shows a llama.cpp build of {MICRO_BATCH_BUILD} or later, where n_ubatch appeared and n_batch's "
        "default became 2048 (512 before, with no micro-batch); import the run's -o jsonl for them"
    ),
}
"""Why a row note is said, for the import's note on the file."""


def known_build(fields: dict[str, Any]) -> bool:
    """True when an md row's `fields` (its build_commit and build_number: its table's build line's or
    columns') are of a build that has MD_OMITTED_DEFAULTS: build_number MICRO_BATCH_BUILD or later, a
    build_commit of KNOWN_COMMITS (7 or more hex digits of it), or what only later builds print: an
    n_ubatch column, an `fa` column (flash attention: llama.cpp PR #5021, 2024-04-30, build ~2775) or
    a depth test (`pp512 @ d4096`: 2025) - a table without a build line shows its vintage that way."""
    if any(fields.get(k) not in (None, "") for k in ("n_ubatch", "flash_attn")) or _depth(fields):
        return True
    number = fields.get("build_number")
    if isinstance(number, int) and not isinstance(number, bool) and number >= MICRO_BATCH_BUILD:
        return True
    short = str(fields.get("build_commit") or "").strip().lower()
    return len(short) >= 7 and any(c.startswith(short) for c in KNOWN_COMMITS)


def fill(fields: dict[str, Any], known: bool | None = None) -> str | None:
    """Fill the columns an md row's table left out with llama-bench's defaults where its build is known
    to have them (`known`: the caller's reading of the whole table, default known_build of this row),
    and return None; else leave them out (unknown) and return the row's note (NO_BATCH_SIZES)."""
    if not (known_build(fields) if known is None else known):
        return NO_BATCH_SIZES
    for name, default in MD_OMITTED_DEFAULTS.items():  # a column left out holds the default
        fields.setdefault(name, default)
    return None


def _depth(fields: dict[str, Any]) -> bool:
    """Whether an md row is a depth test (n_depth above 0: `pp512 @ d4096`)."""
    d = fields.get("n_depth")
    return isinstance(d, int) and not isinstance(d, bool) and d > 0

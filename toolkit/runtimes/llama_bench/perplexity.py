"""llama-perplexity, the correctness canary's program: its command line and its output, pure.

The canary (toolkit.bench.canary) scores a small fixed text shipped here (data/canary.txt: the
opening of the US Declaration of Independence, 1776, public domain; 4752 bytes, 3035 tokens of the
tiny stand-in's 512-token vocabulary) with llama-perplexity in the image it checks, before that
image's sweep. Facts from llama.cpp tools/perplexity/perplexity.cpp at 0c1e57098
(`perplexity()`):

- the text must tokenize to at least 2 x n_ctx tokens, else it logs `you need at least N tokens`
  (LOG_ERR) and the process still exits 0: a run without a result is told apart by its output only;
- each chunk of n_ctx tokens scores its second half; after each chunk it prints `[k]<ppl so far>,` on
  stdout (`nan` when a logit is NaN);
- at the end `Final estimate: PPL = %.4lf +/- %.5lf` on stderr (LOG_INF), printed only when the
  spread of the scored tokens' log-probabilities is positive: otherwise (NaN logits, or every token
  given the same probability: all-equal logits, PPL = the vocabulary size) it prints `Unexpected
  negative standard deviation of log(prob)` instead. The line can follow the `ETA` text on the same
  line (the ETA's LOG has no newline), so it is searched anywhere in a line.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

CANARY_TEXT = Path(__file__).with_name("data") / "canary.txt"
"""The fixed text the canary scores (public domain; see the module docstring)."""

N_CTX = 128
"""Context per chunk (tokens): small, so the canary takes seconds; the text holds >= 4 chunks of it
for the tiny stand-in and for Qwen3's 151,936-token vocabulary (about 1,100 tokens)."""

CHUNKS = 4
"""Chunks scored (--chunks): 4 x 64 scored tokens."""

_FINAL = re.compile(r"Final estimate: PPL = (\S+) \+/- (\S+)")
_CHUNK = re.compile(r"\[(\d+)\]([-+]?(?:nan|inf|(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)),", re.I)
"""`[k]<ppl>,`: a number float() reads (`[1]1.2.3,` or `[1].,`, hostile text, is no chunk value)."""
_TOO_SHORT = re.compile(r"you need at least \d+ tokens[^\n]*")
_NO_SPREAD = "Unexpected negative standard deviation of log(prob)"
_PASS_ETA = "seconds per pass - ETA"
"""What llama-perplexity prints once its first pass is timed, before any chunk value: the run was scoring."""
_SCORING = "calculating perplexity over"
"""The line llama-perplexity prints as it starts scoring (`perplexity: calculating perplexity over 4 chunks,
n_ctx=128, ...`): output that ends there, exit 0, lost every line after it (the pass's ETA, the chunk
values, the estimate) at exit; seen on a fresh Debian 13 stand-in's first bench (2026-12-05)."""


class PerplexityOutputError(ValueError):
    """llama-perplexity printed no result: no `Final estimate` line and not every chunk value (the text
    too short for n_ctx, a model that did not load, a crash, or its last lines lost at exit). The
    message says which, from its output. `cut`: the run got as far as scoring (it printed the pass's
    `ETA` or a chunk value, or its output ends at the line that starts scoring) and its result is
    missing: what llama.cpp's logger losing its queued lines at exit leaves (llama.cpp#22142), worth
    one more process; False for a reason it printed."""

    def __init__(self, message: str, *, cut: bool = False):
        super().__init__(message)
        self.cut = cut


@dataclass(frozen=True)
class Perplexity:
    """One llama-perplexity result. `ppl`: perplexity of the text (dimensionless, >= 1 for a sane
    model; NaN or inf: the model's output is wrong); `ppl_error`: llama.cpp's +/- (None when it printed
    none); `chunks`: the running perplexity after each chunk, as printed; `no_spread`: llama.cpp found
    no spread in the scored tokens' log-probabilities (NaN, or every token equally likely: output a
    trained or even a random-weight model never gives)."""

    ppl: float
    ppl_error: float | None
    chunks: tuple[float, ...]
    no_spread: bool = False


def text_sha256(path: Path = CANARY_TEXT) -> str:
    """sha256 hex of the canary text (stored with each canary result: results compare only over the
    same text)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def perplexity_args(
    model: str,
    text: str,
    *,
    n_ctx: int = N_CTX,
    chunks: int = CHUNKS,
    threads: int,
    n_gpu_layers: int,
    flash_attn: int,
) -> list[str]:
    """llama-perplexity's argument list (argv[1:]): model file `model` and text file `text` (paths in
    the container), n_ctx tokens per chunk, `chunks` chunks, `threads` CPU threads, `n_gpu_layers`
    layers offloaded (-ngl, as the sweep's first value), flash attention 1/0/-1 -> on/off/auto (-fa;
    llama-perplexity takes words at 0c1e57098, common/arg.cpp)."""
    fa = {1: "on", 0: "off", -1: "auto"}[flash_attn]
    return [
        "-m",
        model,
        "-f",
        text,
        "-c",
        str(n_ctx),
        "--chunks",
        str(chunks),
        "-t",
        str(threads),
        "-ngl",
        str(n_gpu_layers),
        "-fa",
        fa,
    ]


def parse_perplexity(stdout: str, stderr: str, chunks_run: int = CHUNKS) -> Perplexity:
    """The result of one llama-perplexity process from what it printed (see the module docstring).

    The `Final estimate` line gives `ppl`; without it, chunk values give the last one as `ppl` (no
    error) when all `chunks_run` were printed (chunk [N] is the running perplexity over chunks 1..N,
    so the last is the final estimate: 535.8769 both, tiny model), when they are not finite, or when
    llama.cpp said the log-probabilities have no spread (`no_spread`). llama.cpp's logger is a leaked
    singleton whose queued lines can be lost at exit (ggml-org/llama.cpp#22142: here 1 run in 6 lost
    the `Final estimate` line idle, 5 in 20 at load 8, exit code 0). Raises PerplexityOutputError
    otherwise (the text too short, a model that did not load, a crash, or those lines lost: `cut`),
    quoting the reason it printed."""
    text = stdout + "\n" + stderr
    chunks = tuple(float(v) for _, v in _CHUNK.findall(text))
    final = _FINAL.search(text)
    if final:
        try:
            return Perplexity(float(final.group(1)), float(final.group(2)), chunks)
        except ValueError:
            raise PerplexityOutputError(f"unreadable estimate {final.group(0)!r}") from None
    if len(chunks) >= chunks_run or (chunks and (not math.isfinite(chunks[-1]) or _NO_SPREAD in stderr)):
        return Perplexity(chunks[-1], None, chunks, no_spread=_NO_SPREAD in stderr)
    short = _TOO_SHORT.search(text)
    seen = f"{len(chunks)} of {chunks_run} chunk values" if chunks else "no chunk value"
    why = short.group(0) if short else f"no `Final estimate` line and {seen}"
    tail = " | ".join(ln.strip() for ln in stderr.splitlines() if ln.strip())[-200:]
    last = next((ln for ln in reversed(stderr.splitlines()) if ln.strip()), "")
    cut = not short and (bool(chunks) or _PASS_ETA in stderr or _SCORING in last)
    raise PerplexityOutputError(
        f"llama-perplexity gave no perplexity: {why} (output ends: {tail!r})", cut=cut
    )

"""vLLM's correctness canary, pure: the script it runs in the image, its argument list, and what it
prints, read into a perplexity over llama-perplexity's token window plus a fixed greedy completion.

The canary (toolkit.bench.canary; the container side in toolkit/bench/runners/vllm.py) scores the
same fixed text as the llama.cpp canary (toolkit/runtimes/llama_bench/data/canary.txt) in the image
it checks, before that image's sweep, with the sweep's own engine settings (`engine_args`: dtype,
quantization, max-model-len, enforce-eager, attention backend, seed 0). `SCRIPT` (run as
`python3 -c SCRIPT --text ... --model ... <engine flags>`) does, with vLLM's offline `LLM` (EngineArgs
from the same flags `vllm bench latency` takes; checked on the pinned 0.28.0 in the CPU image):

- tokenizes the text with the model's tokenizer (`encode`, special tokens as the tokenizer adds
  them). A tokenizer that maps more than half of the text to its unknown token (the tiny stand-in's
  word-level vocabulary `w0 ... w10235` knows no English word) would score one repeated token, whose
  attention output is the same at every position whatever the weights: the text's UTF-8 bytes are
  then the token ids (all below 256, ordinary tokens of any such vocabulary), said as `tokens_from`;
- cuts the tokens into `chunks` chunks of `n_ctx` (the first token of each replaced by BOS where the
  tokenizer adds one), as llama-perplexity does (tools/perplexity/perplexity.cpp `perplexity()` at
  0c1e57098: each chunk evaluated alone, the logits of positions n_ctx/2 ... n_ctx-2 scoring the next
  token: n_ctx - n_ctx/2 - 1 = 63 tokens per chunk of 128, 252 in all);
- generates for all chunks in one `LLM.generate`: SamplingParams(temperature 0, max_tokens
  `completion_tokens`, ignore_eos, prompt_logprobs=0): vLLM returns each prompt token's log-probability
  given the tokens before it (`prompt_logprobs[j][token_j].logprob`, from the raw logits:
  logprobs_mode `raw_logprobs`, 0.28.0's default) and the greedy continuation of each chunk;
- prints one line `TOOLKIT-CANARY {json}` on stdout: vllm_version, tokens_from, text_tokens, bos,
  n_ctx, per chunk its prompt_logprobs (null first, NaN where the model gives NaN), completion (token
  ids) and completion_text, and generate_s (seconds of the generate call).

`parse_canary` reads that line and computes the perplexity over the scored window exactly as
llama-perplexity does (exp of the mean negative log-probability; its +/- from the spread of the
negative log-probabilities; `no_spread` where every scored token got the same probability). These
numbers compare only with another canary of the same method (`METHOD`), model checkpoint and text:
a llama.cpp canary scores a GGUF file with llama.cpp's own tokenizer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from toolkit.core import jsonsafe
from toolkit.runtimes.vllm.args import engine_args
from toolkit.runtimes.vllm.settings import VllmSettings

METHOD = "vllm-prompt-logprobs"
"""The canary's method, stored with each result: only results of one method are compared."""

COMPLETION_TOKENS = 16
"""Greedy tokens generated after each chunk (stored; compared with the control's)."""

MARK = "TOOLKIT-CANARY "
"""The prefix of the script's one result line on stdout."""

SCRIPT = """\
import json, sys, time
import vllm
from vllm import LLM, SamplingParams
from vllm.engine.arg_utils import EngineArgs
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:  # releases before the argparse helpers moved
    from vllm.utils import FlexibleArgumentParser


def main():
    p = FlexibleArgumentParser()
    for flag in ("--text", "--n-ctx", "--chunks", "--completion-tokens"):
        p.add_argument(flag, required=True)
    a = EngineArgs.add_cli_args(p).parse_args()
    n_ctx, n_chunks, n_gen = int(a.n_ctx), int(a.chunks), int(a.completion_tokens)
    llm = LLM(**vars(EngineArgs.from_cli_args(a)))
    tok = llm.get_tokenizer()
    text = open(a.text, encoding="utf-8").read()
    ids, source = list(tok.encode(text)), "tokenizer"
    unk = getattr(tok, "unk_token_id", None)
    if unk is not None and 2 * ids.count(unk) > len(ids):
        ids, source = list(text.encode("utf-8")), "utf-8 bytes"
    bos = tok.bos_token_id if source == "tokenizer" and ids and ids[0] == tok.bos_token_id else None
    chunks = [ids[i * n_ctx:(i + 1) * n_ctx] for i in range(min(n_chunks, len(ids) // n_ctx))]
    for c in chunks:
        c[0] = c[0] if bos is None else bos
    t0 = time.monotonic()
    sp = SamplingParams(temperature=0.0, max_tokens=n_gen, ignore_eos=True, prompt_logprobs=0)
    outs = llm.generate([{"prompt_token_ids": c} for c in chunks], sp, use_tqdm=False) if len(ids) >= 2 * n_ctx else []
    res = []
    for c, o in zip(chunks, outs):
        lps = [None] + [float(d[t].logprob) if d and t in d else None for d, t in zip(o.prompt_logprobs[1:], c[1:])]
        res.append({"prompt_logprobs": lps, "completion": list(o.outputs[0].token_ids), "completion_text": o.outputs[0].text})
    out = {"vllm_version": vllm.__version__, "tokens_from": source, "text_tokens": len(ids), "bos": bos, "n_ctx": n_ctx}
    print("TOOLKIT-CANARY " + json.dumps({**out, "chunks": res, "generate_s": round(time.monotonic() - t0, 3)}), flush=True)


if __name__ == "__main__":  # vLLM's engine core starts by spawn: the child must not run this again
    main()
"""


class CanaryOutputError(ValueError):
    """The script printed no usable result: no `TOOLKIT-CANARY` line, an unreadable one, the text too
    short for two chunks, or a scored log-probability missing. The message says which."""


@dataclass(frozen=True)
class VllmCanary:
    """One vLLM canary's result. ppl: perplexity of the scored window (NaN/inf: the model's output is
    wrong); ppl_error: llama-perplexity's +/- (None without spread); chunks: the running perplexity
    after each chunk; scored: tokens scored; no_spread: every scored token got the same probability;
    tokens_from: `tokenizer` or `utf-8 bytes`; text_tokens: the text's length in those tokens;
    completion: the greedy token ids after each chunk; completion_text: the first chunk's, decoded;
    vllm_version: as the image's vLLM says; generate_s: seconds of the generate call."""

    ppl: float
    ppl_error: float | None
    chunks: tuple[float, ...]
    scored: int
    no_spread: bool
    tokens_from: str
    text_tokens: int
    completion: tuple[tuple[int, ...], ...]
    completion_text: str
    vllm_version: str
    generate_s: float | None


def canary_args(
    model_dir: str, text: str, v: VllmSettings, *, n_ctx: int, chunks: int, completion_tokens: int
) -> list[str]:
    """The canary's command in the image (argv): SCRIPT with the model directory and text file (paths
    in the container), the window (n_ctx tokens per chunk, `chunks` chunks), `completion_tokens`
    greedy tokens per chunk and the sweep's engine flags (args.engine_args)."""
    return [
        "python3",
        "-c",
        SCRIPT,
        "--text",
        text,
        "--n-ctx",
        str(n_ctx),
        "--chunks",
        str(chunks),
        "--completion-tokens",
        str(completion_tokens),
        "--model",
        model_dir,
        *engine_args(v),
    ]


def window_perplexity(
    logprobs: list[list[float | None]], n_ctx: int
) -> tuple[float, float | None, tuple[float, ...], int, bool]:
    """(ppl, +/-, running ppl per chunk, tokens scored, no spread) over llama-perplexity's window:
    per chunk the log-probabilities of positions n_ctx/2 + 1 ... n_ctx - 1 (each given the tokens
    before it). +/- as llama.cpp: sqrt(var(nll) / (count - 1)) x ppl, None when the variance is not
    positive (no spread, or NaN). Raises CanaryOutputError where a chunk is shorter than n_ctx or a
    scored value is missing."""
    first = n_ctx // 2
    nll: list[float] = []
    running: list[float] = []
    for k, lps in enumerate(logprobs):
        window = lps[first + 1 : n_ctx]
        if len(lps) < n_ctx or any(x is None for x in window):
            raise CanaryOutputError(f"chunk {k + 1}: {len(lps)} prompt log-probabilities, a value missing")
        nll += [-float(x) for x in window if x is not None]
        running.append(math.exp(math.fsum(nll) / len(nll)))
    if not nll:
        raise CanaryOutputError("no chunk was scored")
    mean = math.fsum(nll) / len(nll)
    var = math.fsum((x - mean) ** 2 for x in nll) / len(nll) if math.isfinite(mean) else math.nan
    ppl = math.exp(mean)
    spread = var > 0 and len(nll) > 1
    return (
        ppl,
        (math.sqrt(var / (len(nll) - 1)) * ppl if spread else None),
        tuple(running),
        len(nll),
        not spread,
    )


def parse_canary(stdout: str, stderr: str = "", *, n_ctx: int) -> VllmCanary:
    """The result of one canary container from what it printed (module docstring). Raises
    CanaryOutputError when there is none, quoting the end of stderr."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        tail = " | ".join(ln.strip() for ln in stderr.splitlines() if ln.strip())[-200:]
        raise CanaryOutputError(f"the canary script printed no result (output ends: {tail!r})")
    try:
        data = jsonsafe.parse_object(line[len(MARK) :])
        chunks = data["chunks"]
        if not chunks:
            raise CanaryOutputError(
                f"the text is {data['text_tokens']} tokens ({data['tokens_from']}); the canary needs "
                f"at least 2 x {n_ctx}"
            )
        ppl, err, running, scored, flat = window_perplexity([c["prompt_logprobs"] for c in chunks], n_ctx)
        return VllmCanary(
            ppl=ppl,
            ppl_error=err,
            chunks=running,
            scored=scored,
            no_spread=flat and math.isfinite(ppl),
            tokens_from=str(data["tokens_from"]),
            text_tokens=int(data["text_tokens"]),
            completion=tuple(tuple(int(t) for t in c["completion"]) for c in chunks),
            completion_text=str(chunks[0].get("completion_text", "")),
            vllm_version=str(data.get("vllm_version")),
            generate_s=float(g) if isinstance(g := data.get("generate_s"), int | float) else None,
        )
    except CanaryOutputError:
        raise
    except (jsonsafe.JsonProblem, KeyError, TypeError, ValueError) as err:
        raise CanaryOutputError(
            f"unreadable canary result ({type(err).__name__}: {str(err)[:120]})"
        ) from None


def greedy_agreement(got: tuple[tuple[int, ...], ...], control: list[Any]) -> tuple[int, int]:
    """(tokens, of): how many greedy tokens `got` shares with the control's `control` before each
    chunk's first difference, summed over chunks, out of all of `got`'s tokens. Pure."""
    same = 0
    for mine, theirs in zip(got, control, strict=False):
        for a, b in zip(mine, theirs, strict=False):
            if a != b:
                break
            same += 1
    return same, sum(len(c) for c in got)


def details(p: VllmCanary, control: dict[str, Any] | None) -> dict[str, Any]:
    """What a vLLM canary stores beside its perplexity (CanaryResult.details): the window and token
    source, the running perplexity per chunk, the greedy completion (and, against `control`: the
    CPU control's details, how many of its greedy tokens agree), vLLM's version, the generate call's
    seconds, and `said`, the part of the progress line that is vLLM's. Pure."""
    total = sum(len(c) for c in p.completion)
    theirs = (control or {}).get("completion")
    same = greedy_agreement(p.completion, theirs)[0] if isinstance(theirs, list) else None
    said = f"{p.scored} tokens scored by vLLM {p.vllm_version}" + (
        f" (token ids: the text's {p.tokens_from}, the tokenizer knows too little of it)"
        if p.tokens_from != "tokenizer"
        else ""
    )
    said += (
        f"; greedy completion: {same} of {total} tokens as the control's"
        if same is not None
        else f"; greedy completion of {total} tokens stored"
    )
    return {
        "said": said,
        "scored_tokens": p.scored,
        "tokens_from": p.tokens_from,
        "text_tokens": p.text_tokens,
        "chunk_ppl": list(p.chunks),
        "completion": [list(c) for c in p.completion],
        "completion_text": p.completion_text,
        "greedy_same_as_control": same,
        "vllm_version": p.vllm_version,
        "generate_s": p.generate_s,
    }

"""The correctness canary's rule (toolkit.bench.canary runs it) and the check of a stored result
against it: `judge` decides a perplexity against the CPU control's; `canary_problem` says why a stored
`ok` result (CanaryResult.record(), on each record as `canary` and in results/*/canary.jsonl) does not
follow from its own figures by it. Here, below the report and the runner, so both read one rule."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from toolkit.core.errors import BadInput
from toolkit.core.stats import finite_number
from toolkit.core.types import is_image_id
from toolkit.results.records import BenchRecord, read_jsonl, short_digest

BOUND_LN = 0.05
"""The largest |ln(PPL_image / PPL_cpu)| of a correct image (0.05: within about 5 %). Measured here
(2026-12-02, llama.cpp 0c1e57098, the tiny stand-in, text sha256 of data/canary.txt): CPU image PPL
535.8769, Vulkan image on Mesa lavapipe 535.9028, |ln ratio| = 4.8e-5. The bound leaves three orders
of magnitude for the numeric differences of real GPU kernels (quantized dot products in other orders and
precisions); a broken kernel or corrupted weights give NaN or a perplexity off by a factor, far beyond
it. Not yet measured with the reference model on an R9700: revisit the margin there."""

FLAG = "wrong-output"
STATUSES = ("ok", FLAG, "unchecked")
LN_SLACK = 1e-5
"""How far a stored ln_ratio may lie from ln(ppl / control ppl) of its stored figures: both PPLs
written to 6 significant digits move the ratio by at most 2e-6."""


def judge(ppl: float, control_ppl: float | None, bound_ln: float = BOUND_LN) -> tuple[str, str, float | None]:
    """(status, reason, ln ratio) for a perplexity `ppl` against the CPU control's `control_ppl` (None:
    no control). `wrong-output` when ppl is not finite or below 1, or |ln(ppl / control_ppl)| >
    bound_ln; else `ok`. Pure; `control_ppl` is a sane model's (finite, >= 1)."""
    if not (math.isfinite(ppl) and ppl >= 1.0):
        return FLAG, f"perplexity {ppl} is not a sane model's (not finite, or below 1)", None
    if control_ppl is None:
        return "ok", "", None
    ratio = math.log(ppl / control_ppl)
    if abs(ratio) > bound_ln:
        return (
            FLAG,
            f"perplexity {ppl:.4g} differs from the CPU control's {control_ppl:.4g} by a factor "
            f"{math.exp(abs(ratio)):.3g} (|ln ratio| {abs(ratio):.3g} > bound {bound_ln})",
            ratio,
        )
    return "ok", "", ratio


def _figure(v: Any) -> float | None:
    """A stored canary figure: a JSON number, or the text CanaryResult.record() writes for a NaN or an
    infinity ('nan', 'inf', '-inf'); None for anything else (no figure)."""
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    return finite_number(v)


def canary_problem(c: dict[str, Any]) -> str | None:
    """Why stored canary result `c` contradicts itself, naming the figure; None when it does not. A
    status other than ok, wrong-output and unchecked; an `ok` whose figures `judge` does not pass: a
    ppl that is no number, NaN, inf, below 1; a bound_ln that is not one the canary judges by (above 0
    and at most BOUND_LN: every canary is judged by BOUND_LN, and a pass under a tighter bound passes
    it too; a looser one, 1000, passes anything); a control that is not an object with a sane ppl; the
    CPU image's own control (`_own_problem`) that is not its own figures; an ln_ratio that is not
    ln(ppl / the control's ppl) to LN_SLACK, or none beside another image's control. (unchecked holds
    no figure; wrong-output may follow from what the figures do not hold: every token equally likely.)"""
    status = c.get("status")
    if status not in STATUSES:
        return f"status {status!r:.40} is none of {', '.join(STATUSES)}"
    if status != "ok":
        return None
    ppl, bound, control = _figure(c.get("ppl")), _figure(c.get("bound_ln", BOUND_LN)), c.get("control")
    if ppl is None:
        return f"status ok with ppl {c.get('ppl')!r:.40}: no perplexity"
    if bound is None or not 0 < bound <= BOUND_LN:
        return (
            f"bound_ln {c.get('bound_ln')!r:.40} is no bound the canary uses: the canary judges by {BOUND_LN} "
            "(a pass under a looser bound says nothing)"
        )
    if control is not None and not isinstance(control, dict):
        return f"control {control!r:.40} is not a control's result"
    cppl = _figure(control.get("ppl")) if control else None
    if control and not (cppl is not None and math.isfinite(cppl) and cppl >= 1):
        return f"the control's ppl {control.get('ppl')!r:.40} is not a sane model's"
    own = isinstance(control, dict) and bool(control) and _key(control)[:2] == _key(c)[:2]
    if (own or c.get("backend") == "cpu") and (why := _own_problem(c, control, ppl, cppl)):
        return why
    status, reason, ratio = judge(ppl, cppl, bound)
    if status != "ok":
        return f"status ok, but {reason}"
    ln = c.get("ln_ratio")
    if ln is None and (ratio is None or own):
        return None  # no control, or the CPU image is its own
    if ratio is None or (got := _figure(ln)) is None or not abs(got - ratio) <= LN_SLACK + 1e-3 * abs(ratio):
        expect = "none: there is no control" if ratio is None else f"ln({ppl:.6g} / {cppl:.6g}) = {ratio:.6g}"
        return f"ln_ratio {ln!r:.40} is not {expect}"
    return None


def _key(c: dict[str, Any]) -> tuple[str, str, str]:
    """(image, digest, run_id) of a canary result or of the control it names."""
    return str(c.get("image")), str(c.get("digest")), str(c.get("run_id"))


def _own_problem(c: dict[str, Any], control: Any, ppl: float, cppl: float | None) -> str | None:
    """Why the ok canary of a CPU image (`c`, backend cpu or a control naming its own image and digest)
    is not its own control as toolkit.bench.canary.judge_parsed writes it: the control is itself, of
    its run, with its perplexity (the same float). None without a control (no comparison claimed)."""
    if not isinstance(control, dict):
        return None
    if _key(control)[:2] != _key(c)[:2]:
        return (
            f"a cpu image's canary is its own control, this one names {str(control.get('image'))[:40]!r} "
            f"{str(control.get('digest'))[:19]}"
        )
    if cppl is None or abs(cppl - ppl) > 1e-6 * ppl:
        return f"its own control's ppl {control.get('ppl')!r:.40} is not its ppl {ppl!r:.40}"
    if c.get("run_id") and control.get("run_id") != c.get("run_id"):
        return f"its own control's run_id {control.get('run_id')!r:.40} is not its run_id {c.get('run_id')!r:.40}"
    return None


def own_controls(canaries: Iterable[Any]) -> dict[tuple[str, str, str, str], float]:
    """The CPU controls among stored canary results: (image, digest, run_id, model_sha256) -> ppl of
    each ok result that is its own control and does not contradict itself (what another image's
    canary of that run and model was judged against: one run canaries every model it benches)."""
    out: dict[tuple[str, str, str, str], float] = {}
    for c in canaries:
        control = c.get("control") if isinstance(c, dict) and c.get("status") == "ok" else None
        if isinstance(control, dict) and _key(control) == _key(c) and canary_problem(c) is None:
            ppl = _figure(c.get("ppl"))
            if ppl is not None:
                out.setdefault((*_key(c), str(c.get("model_sha256"))), ppl)
    return out


def control_problem(c: dict[str, Any], controls: Mapping[tuple[str, str, str, str], float]) -> str | None:
    """Why ok canary `c` was not judged against its control's stored result: the control it names
    (image, digest, run), of c's model, is among `controls` (own_controls) with another perplexity;
    None otherwise (its own control, a control not at hand, or no control)."""
    control = c.get("control")
    if c.get("status") != "ok" or not isinstance(control, dict) or _key(control)[:2] == _key(c)[:2]:
        return None
    stored = controls.get((*_key(control), str(c.get("model_sha256"))))
    cppl = _figure(control.get("ppl"))
    if stored is None or (cppl is not None and abs(cppl - stored) <= 1e-6 * stored):
        return None
    said = f"{cppl:.6g}" if cppl is not None else f"{control.get('ppl')!r:.40}"
    return (
        f"its control's ppl {said} is not the control's stored {stored:.6g} ({_key(control)[0][:40]}, run "
        f"{_key(control)[2][:40]})"
    )


def stored_canaries(root: Path | None, shown: Iterable[BenchRecord] | None = None) -> list[dict[str, Any]]:
    """The canary results stored in results folder `root` (results/<digest12>/canary.jsonl, and a
    campaign host's results/hosts/<host>/<digest12>/canary.jsonl; one JSON object per line, a line that
    is not one passed over): the CPU controls a shown GPU canary may name when the control's own
    records are not shown (`report --image vulkan`, or a control measured in an earlier run). With
    `shown` (the records a report shows), only the folders of the digests their
    canaries name as control are read: what else the folder holds costs nothing. [] for no root; a
    file that cannot be read (not a regular file, no permission) gives none."""
    if root is None:
        return []
    folders = ["*"]  # every digest folder, or only those the shown canaries name as control
    if shown is not None:
        folders = sorted({d for r in shown if (d := _control_digest(r))})
    files = {
        p for n in folders for p in (*root.glob(f"{n}/canary.jsonl"), *root.glob(f"hosts/*/{n}/canary.jsonl"))
    }
    out: list[dict[str, Any]] = []
    for f in sorted(files):
        try:
            out += read_jsonl(f)
        except (BadInput, OSError):
            continue
    return out


def _control_digest(r: BenchRecord) -> str | None:
    """The 12-hex folder name of the CPU control a record's canary names, or None (no canary, no
    control, or a digest that is not `sha256:` and 64 hex digits: nothing read for it)."""
    c = (r.model_extra or {}).get("canary")
    control = c.get("control") if isinstance(c, dict) else None
    digest = control.get("digest") if isinstance(control, dict) else None
    return short_digest(digest) if is_image_id(digest) else None

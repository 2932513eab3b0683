"""What a verdict tells the user to run where no test was measured by every image (verdict's
no_common_note): the model to measure on each, named as the project's bench measured it, the import for
an import, and the report that ranks the images that share a test, with the user's own report options."""

from __future__ import annotations

from toolkit.analysis.facts import Facts, model_family, model_words
from toolkit.core import invocation
from toolkit.core.text import Prose
from toolkit.results.records import imported


def no_common_note(fs: list[Facts], cols: dict[int, str], images: list[str]) -> str:
    """Why no group was measured by every image, and what to run: different models (model_family, as
    the groups are keyed: one model's files in two formats are one model), else different tests of one
    model, each image's named (`a: tg16; b: tg128`, at most 4 each)."""
    models = {img: {model_family(f.record) for f in fs if cols[id(f.record)] == img} for img in images}
    head = f"no test of the same model was measured by every image ({', '.join(images)}): "
    any_imported = any(imported(f.record.image.digest) for f in fs)  # no bench can measure it here
    if not set.intersection(*models.values()):  # no model every image measured: more images won't do
        said, data = _other_models_note(fs, cols, models)
    else:
        tests = {img: sorted({f.record.test for f in fs if cols[id(f.record)] == img}) for img in images}
        each = "; ".join(
            f"{img}: {', '.join(t[:4])}{', ...' if len(t) > 4 else ''}" for img, t in tests.items()
        )
        bench = invocation.command("bench")
        data = [each, bench]
        said = (
            f"they measured different tests ({each}); measure one test on each (`{bench}` runs "
            f"matrix.yaml's{', or import a result file of one of them' if any_imported else ''})"
        )
    shared = _shared_reports(fs, cols)
    return Prose(
        head + said + "".join(f"; the images that measured {m} are ranked by `{cmd}`" for m, cmd in shared),
        *images,
        *data,
        *(x for pair in shared for x in pair),
    )


def _other_models_note(
    fs: list[Facts], cols: dict[int, str], models: dict[str, set[str]]
) -> tuple[str, list[str]]:
    """What to run where images measured different models: the model most of them measured (of those, one
    this project's bench measured first), named as the bench did (its catalog name) for each image built
    here that lacks it (`toolkit bench -i b -m qwen3-0.6b`), else as its records name it, to import for
    each import (no bench measures an import)."""
    own = {model_family(f.record): f.record.model.name for f in fs if not imported(f.record.image.digest)}
    family = max(
        sorted(set().union(*models.values())), key=lambda m: (sum(m in v for v in models.values()), m in own)
    )
    name = own.get(family) or next(f.record.model.name for f in fs if model_family(f.record) == family)
    lack = {
        f.record.image.name: f.record.image.digest for f in fs if family not in models[cols[id(f.record)]]
    }
    built = sorted(n for n, d in lack.items() if family in own and not imported(d))
    bench = invocation.command("bench", *(w for n in built for w in ("-i", n)), "-m", name) if built else ""
    rest = sorted(set(lack) - set(built))
    ways = [f"`{bench}`"] * bool(built) + [f"import a result file of {name} for {', '.join(rest)}"] * bool(
        rest
    )
    return f"they measured different models; measure {name} on each ({'; '.join(ways)})", [
        x for x in (name, bench, *rest) if x
    ]


def _shared_reports(fs: list[Facts], cols: dict[int, str]) -> list[tuple[str, str]]:
    """(`TEST of MODEL`, `toolkit report -i NAME ...`) per model: the images that measured its test most
    images measured (2 at least), where `-i` of their names selects no image that did not (a report
    the verdict ranks on that test)."""
    names = {cols[id(f.record)]: f.record.image.name for f in fs}
    measured = {(model_family(f.record), f.record.test, cols[id(f.record)]) for f in fs}
    words = {model_family(f.record): model_words(f.record) for f in fs}
    best: dict[str, tuple[str, list[str]]] = {}
    for m, t in sorted({(m, t) for m, t, _ in measured}):
        pick = sorted({names[img] for mm, tt, img in measured if (mm, tt) == (m, t)})
        if len(pick) > max(1, len(best.get(m, ("", []))[1])) and all(
            (m, t, img) in measured for img, n in names.items() if n in pick
        ):
            best[m] = (t, pick)
    return [
        (
            f"{t} of {words[m]}",
            invocation.again("report", *(w for n in pick for w in ("-i", n)), drop=("--image",)),
        )
        for m, (t, pick) in best.items()
    ]

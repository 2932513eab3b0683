"""What a report says above its tables about all of its numbers (a tiny stand-in model, a software
GPU, an experimental runtime, every number held by its flags): the caveats the verdict, compare and
reproduce print first."""

from __future__ import annotations

from toolkit.analysis.facts import Facts, image_label, stand_in
from toolkit.analysis.flag_help import RPC_FLAG, held_words
from toolkit.core import backends
from toolkit.results import identity
from toolkit.results.records import BenchRecord, imported


def smoke_caveats(records: list[BenchRecord]) -> list[str]:
    """Why these numbers are smoke signals, not a basis for routing: a tiny stand-in model, a
    software (CPU-type) GPU device. A model is named once (tiny_names)."""
    out = []
    tiny = tiny_names(records)
    if tiny:
        are = "is a tiny stand-in model; its" if len(tiny) == 1 else "are tiny stand-in models; their"
        out.append(
            f"smoke-test data: {', '.join(tiny)} {are} tok/s show the path works, they are not a basis for routing"
        )
    soft = sorted({image_label(r) for r in records if backends.is_software_device(r.gpu_info)})
    if soft:
        out.append(f"software GPU: {', '.join(soft)} ran on Mesa lavapipe (the CPU), not a GPU")
    exp = sorted({image_label(r) for r in records if (r.model_extra or {}).get("experimental")})
    if exp:
        out.append(
            f"experimental runtime: {', '.join(exp)} (its verdicts hold for this enablement patch, not for "
            "an upstream release)"
        )
    return out


def tiny_names(records: list[BenchRecord]) -> list[str]:
    """The names of the tiny stand-in models `records` measured (facts.stand_in), one per model file:
    records of one file name described alike by llama-bench (identity.model_fingerprint) are one
    model, named as a bench named it before an import's file name (`tiny-qwen3moe`, not also
    `tiny-qwen3moe.gguf` of a compare against an import of the same file, nc48b S8); sorted."""
    names: dict[tuple, str] = {}
    for r in sorted((r for r in records if stand_in(r)), key=lambda r: imported(r.image.digest)):
        file = (r.model.path or "").rsplit("/", 1)[-1] or r.model.name
        names.setdefault((file, identity.model_fingerprint(r)), r.model.name)
    return sorted(set(names.values()))


def held_caveats(facts: list[Facts]) -> list[str]:
    """When every number shown is held (Facts.held_flags: telemetry or above-peak flags), one line that
    says so above the tables (a newcomer on a busy host read its first table, every row flagged
    host-busy, as broken); [] otherwise, or for fewer than two numbers."""
    valued = [f for f in facts if f.value]
    if len(valued) < 2 or not all(f.held_flags for f in valued):
        return []
    names = sorted({x.split(":", 1)[0] for f in valued for x in f.held_flags})
    fix = (
        "run again where nothing else shares the host and GPU"
        if set(names) - {RPC_FLAG}
        else held_words(names, "fix")
    )
    return [
        f"every number shown is flagged ({', '.join(names)}: see the flags under the tables): they say the "
        f"path works, not what the images can do; {fix}"
    ]

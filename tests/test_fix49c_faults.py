"""fix49c: two faults brk49 found.

1. (brk49 F3) The speed bound a row's named devices set (plausible.held_by) assumed each token reads
   and computes with at least 3 % of the weights even where the row's model_type states its share:
   Qwen3-30B-A3B (10.8 % active) at 20,000 tok/s on one device of a product without figures, 37 TB/s,
   was imported as valid; a dense qwen3 8B (100 %) was held to 33x what one device reads. The share a
   model type states is now read in one place (plausible.stated_share), by the roofline and the bound.
2. A TOOLKIT_* variable holding a control character (TOOLKIT_HOST_KEY=$'lab\\nb') was taken, and went
   into records as the campaign host key; a campaign host key or other matrix word with a trailing
   newline passed its `^...$` pattern (`$` matches before a final newline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.e2e_helpers import make_project
from tests.support.runs import tk
from toolkit.core.errors import BadInput

ROOT = Path(__file__).resolve().parents[1]
ROW = json.loads(
    (ROOT / "tests" / "data" / "cases" / "two-builds-one-file.jsonl").read_text().splitlines()[0]
)  # an R9700 Vulkan row of `qwen3moe 30B.A3B Q4_K - Medium`, 17.28 GB, 30.5 B parameters
DENSE_8B = {"model_size": 5_027_783_488, "model_n_params": 8_190_735_360}  # qwen3 8B Q4_K_M's figures


def _row(ts: float, n_prompt: int = 0, n_gen: int = 128, **kw: object) -> dict:
    """ROW as a test of n_prompt + n_gen tokens at `ts` tok/s on one device of a product without figures
    (no roofline: only the devices' bound holds it), three equal repetitions, `kw` replacing fields."""
    ns = round((n_prompt + n_gen) * 1e9 / ts)
    return ROW | {
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "avg_ts": ts,
        "stddev_ts": 0.0,
        "avg_ns": ns,
        "stddev_ns": 0,
        "samples_ts": [ts] * 3,
        "samples_ns": [ns] * 3,
        "gpu_info": "Foo GPU 9000",
        **kw,
    }


@pytest.mark.parametrize(
    ("ts", "fields", "said"),
    [
        (20_000.0, {}, "(0.108 of the weights a forward pass"),  # the reproducer: 37 TB/s on one device
        (
            30_000.0,
            {"model_type": "bailingmoe2 16B.A1B Q4_K - Medium"},
            "(0.0625 of the weights a forward pass",
        ),
        (20_000.0, {"model_type": "qwen3 8B Q4_K - Medium", **DENSE_8B}, "(1 of the weights a forward pass"),
        (
            20_000.0,
            {"model_type": "newarch 8B Q4_K - Medium", **DENSE_8B},
            None,
        ),  # may be an unknown MoE: 3 %
    ],
)
def test_a_decode_beyond_what_one_device_reads_at_its_stated_share_is_refused(
    tmp_path: Path, ts: float, fields: dict, said: str | None
) -> None:
    """Each row was imported (exit 0) while 3 % of its weights a token stayed under one device's 25 TB/s;
    at the share its type states (the table's 3.3/30.5, `16B.A1B`, a dense architecture's 1) it reads
    more: refused, exit 4, naming the share. A type that only lacks an MoE marker keeps the 3 %."""
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps(_row(ts, **fields)) + "\n")
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "bm")
    if said is None:
        assert res.returncode == 0, res.stdout + res.stderr
        return
    assert res.returncode == 4, res.stdout + res.stderr
    assert said in res.stderr and "what the 1 GPU device the row names reads" in res.stderr, res.stderr


@pytest.mark.parametrize(
    ("model_type", "refused"),
    [("qwen3 8B Q4_K - Medium", True), ("newarch 8B Q4_K - Medium", False)],
)
def test_a_prefill_beyond_what_one_device_computes_at_its_stated_share_is_refused(
    model_type: str, refused: bool
) -> None:
    """The compute side: pp4096 (one micro-batch of 4096: the bytes it reads allow 20 million tok/s) of a
    dense 8.2 B model at 5 million tok/s is 8.2e16 FLOP/s (2 FLOPs per token and parameter), more than
    one device's 5e16; at 3 % active it was 2.5e15 and kept."""
    from toolkit.runtimes.llama_bench.validity import check_row

    one_batch = {"n_batch": 4096, "n_ubatch": 4096}
    why = check_row(_row(5e6, n_prompt=4096, n_gen=0, model_type=model_type, **DENSE_8B, **one_batch))
    if not refused:
        assert why is None, why
        return
    assert why is not None and "(2 FLOPs per token and active parameter, 1 of them active)" in why, why
    assert "what the 1 GPU device the row names computes" in why, why


@pytest.mark.parametrize(
    ("model_type", "share", "source"),
    [
        ("qwen3moe 30B.A3B Q4_K - Medium", 3.3 / 30.5, "table"),
        ("bailingmoe2 16B.A1B Q8_0", 1 / 16, "model-type"),
        ("gemma3 27B Q4_K - Medium", 1.0, "dense-arch"),
        ("llama 8B Q4_K - Medium", 1.0, "dense"),
        ("deepseek2 671B Q4_K - Medium", None, None),
        ("qwen3moe 30B.A0B Q4_K - Medium", None, None),  # no weights active is no share: no division by 0
    ],
)
def test_the_roofline_and_the_bound_read_one_share(
    model_type: str, share: float | None, source: str | None
) -> None:
    """plausible.stated_share is the one reading of a model type's share: the roofline's (without a
    GGUF file) is it, and the validity pass holds a row to it (least_share: 3 % where none is stated)."""
    from tests.support.records import make_record
    from toolkit.analysis import roofline
    from toolkit.runtimes.llama_bench import plausible

    got = plausible.stated_share(model_type)
    assert (got and (round(got.params_share, 6), got.source)) == (share and (round(share, 6), source))
    rec = make_record("vulkan", "vulkan", n=128, avg=90.0, raw={"model_type": model_type})
    assert roofline.active_share(rec) == got
    least = share if share is not None and source != "dense" else plausible.MIN_ACTIVE_SHARE
    assert plausible.least_share({"model_type": model_type}) == pytest.approx(least)


@pytest.mark.parametrize(
    ("name", "value", "good"),
    [
        ("TOOLKIT_HOST_KEY", "lab\nb", "lab-b"),  # the reproducer: the campaign host key of every record
        ("TOOLKIT_HOST_KEY", "lab\x1b[2J", "lab"),
        ("TOOLKIT_HOST_KEY", "lab\u202e", "lab"),
        ("TOOLKIT_CACHE", "/tmp/fix49c-cache\n", "/tmp/fix49c-cache"),
        ("TOOLKIT_ENGINE", "docker\n", "docker"),
        ("TOOLKIT_ALLOW_CONCURRENT", "1\n", "1"),
    ],
)
def test_a_toolkit_variable_holding_a_control_character_is_refused(name: str, value: str, good: str) -> None:
    """Each was taken (exit 0: a newline stripped, or stored as it is); now exit 4 naming the variable
    and the fix, before any command runs. The same variable on one line still runs."""
    res = tk(ROOT, "bench", "--dry-run", "-i", "cpu", env={name: value})
    assert res.returncode == 4, res.stdout + res.stderr
    assert f"{name}={value!r} holds a control character" in res.stderr, res.stderr
    assert f"set it to one line of text, or unset it (`unset {name}`)" in res.stderr, res.stderr
    ok = tk(ROOT, "bench", "--dry-run", "-i", "cpu", env={name: good})
    assert ok.returncode == 0, ok.stderr


def _campaign(data: dict, host: dict) -> None:
    data["campaign"] = {"gres_type": "fake", "hosts": [host]}


def _image_name(data: dict, name: str) -> None:
    data["images"][0]["name"] = name


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: _campaign(d, {"node": "n1\n"}), ["node", "letters, digits"]),
        (lambda d: _campaign(d, {"node": "n1", "alias": "lab\n"}), ["alias", "letters, digits"]),
        (lambda d: _image_name(d, "cpu\n"), ["image name must be"]),
        (lambda d: d["models"][0].update(name="tiny\n"), ["model name must be"]),
    ],
)
def test_a_matrix_word_ending_in_a_newline_is_refused(tmp_path: Path, edit, words: list[str]) -> None:
    """`^[A-Za-z0-9]...$` matched `n1\\n` (`$` matches before a final newline): the host key of a
    campaign's records and its results folder, an image's or a model's name held a line break. Every
    word pattern is now matched whole."""
    from toolkit.matrix.api import load_matrix

    p = make_project(tmp_path, images=["cpu"], bench={"repetitions": 1})
    data = yaml.safe_load((p / "matrix.yaml").read_text())
    edit(data)
    (p / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(BadInput) as err:
        load_matrix(p / "matrix.yaml")
    assert all(w in str(err.value) for w in words), str(err.value)


def test_a_word_of_a_template_a_revision_or_a_job_ending_in_a_newline_is_refused() -> None:
    """The same `$` in the other patterns that hold a value to one word: a template variable's value, a
    revision pinned into matrix.yaml, a Slurm job's campaign and host key."""
    from toolkit.campaign.slurm import Slice
    from toolkit.matrix.template_vars import check_safe
    from toolkit.models.checkpoint import pin_revision_in_matrix

    with pytest.raises(ValueError, match="not allowed"):
        check_safe("gfx1201\n", "vars.gfx")
    with pytest.raises(ValueError, match="40-hex commit"):
        pin_revision_in_matrix(Path("/nonexistent/matrix.yaml"), "m", "a" * 40 + "\n")
    with pytest.raises(ValueError, match="letters, digits"):
        Slice.model_validate(
            {"campaign": "c1", "index": 0, "host": "n1\n", "engine": "n1", "image": "cpu", "backend": "cpu"}
            | {"runner": "llama-bench", "model": "m", "image_id": "sha256:" + "a" * 64, "pull": "r/cpu@x"}
            | {"build": {}, "job_name": "j", "script": "s.sh", "output": "o-%j.out"}
        )

"""Breaker round 11 (docs/reliability-log.md section 15): a report made slow, huge or failing by a file a
record names (the roofline read the whole GGUF), by patterns that backtrack quadratically on a stored
or imported value, by int() of a 5000-digit run, by a stored host field of the wrong type, and by a
5 MB version copied whole into the provenance. Hostile inputs are made in tmp_path."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from tests.support.records import make_record
from toolkit.analysis import provenance, roofline
from toolkit.core import gpuspecs, jsonsafe
from toolkit.models import gguf_meta
from toolkit.results import identity, import_repeats
from toolkit.runtimes.llama_bench import output, plausible, readers, validity
from toolkit.runtimes.vllm import args as vargs

SLOW = 5.0  # seconds: every 1 MB input below takes well under 0.5 s when linear, minutes when quadratic


def _timed(fn, *a) -> float:
    t = time.perf_counter()
    fn(*a)
    return time.perf_counter() - t


# ---------------------------------------------------------------- 1. files a record names


def _hostile_gguf(path: Path, items: int, item_type: int = 0) -> Path:
    """A GGUF v3 with 0 tensors and one key `a`: an array of `items` items of `item_type` (0: uint8,
    8: empty strings), as the breaker made it."""
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
        f.write(struct.pack("<Q", 1) + b"a" + struct.pack("<IIQ", 9, item_type, items))
        f.write(b"\x01" * items if item_type == 0 else b"\x00" * 8 * items)
    return path


def test_a_huge_declared_array_is_skipped_not_built(tmp_path):
    path = _hostile_gguf(tmp_path / "h.gguf", 10**7)  # GGUFReader: 208 s, 7.1 GB
    assert _timed(roofline.gguf_active_share, str(path)) < SLOW
    assert roofline.gguf_active_share(str(path)) == roofline.ActiveShare(1.0, 1.0, "gguf")


def test_more_string_items_than_a_header_holds_is_unknown(tmp_path):
    path = _hostile_gguf(tmp_path / "s.gguf", gguf_meta.MAX_ITEMS + 1, item_type=8)
    assert _timed(gguf_meta.read_summary, str(path)) < SLOW
    assert gguf_meta.read_summary(str(path)) is None


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("x" * 20_000, id="name-too-long"),
        pytest.param("a\0b", id="nul"),
        pytest.param("/" + "d/" * 3000 + "m.gguf", id="path-too-long"),
        pytest.param(".", id="directory"),
        pytest.param("/dev/null", id="not-a-regular-file"),
    ],
)
def test_a_name_no_file_can_have_is_unknown_never_an_error(name):
    assert roofline.gguf_active_share(name) is None
    r = make_record("a", "rocm", n=128, avg=50.0, raw={"model_type": "qwen3moe 30B.A3B Q4_K - Medium"})
    r.model.path = name
    assert roofline.active_share(r).source == "table"  # the record's own model type, as without a file


def test_the_header_is_read_once_per_file_state(tmp_path):
    path = _hostile_gguf(tmp_path / "c.gguf", 16)
    first = gguf_meta.read_summary(str(path))
    assert gguf_meta.read_summary(str(path)) is first
    _hostile_gguf(path, 17)  # rewritten in place: another size, read again
    assert gguf_meta.read_summary(str(path)) is not first


# ---------------------------------------------------------------- 2. patterns on stored text

MB = 1 << 20


@pytest.mark.parametrize(
    ("what", "call"),
    [
        ("identity _NUMERIC", lambda s: identity._NUMERIC.fullmatch(s)),
        ("identity text value", lambda s: identity._text_value(s)),
        ("readers _NUMBER", lambda s: readers._NUMBER.findall(s)),
        ("plausible _NBA_RE", lambda s: plausible._NBA_RE.search(s)),
        ("gpuspecs normalize_name", lambda s: gpuspecs.normalize_name(s)),
        ("vLLM log notes", lambda s: vargs.log_notes(s)),
        ("progress line", lambda s: output.progress_of(s)),
    ],
)
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("1" * MB + "x", id="digits"),
        pytest.param("1" * (MB // 2) + "." + "1" * (MB // 2) + "x", id="digits-dot-digits"),
        pytest.param(" " * MB + "x", id="spaces"),
        pytest.param("(a)" * (MB // 3) + "(", id="paren-groups"),
        pytest.param("Using a " * (MB // 8), id="using"),
        pytest.param("with config: " * (MB // 13), id="with-config"),
    ],
)
def test_every_pattern_on_stored_text_is_linear(what, call, text):
    assert _timed(call, text) < SLOW, what


def test_an_unterminated_string_steps_over_in_linear_time():
    text = "[" + '\\"' * MB
    assert _timed(jsonsafe.value_end, text, 0) < SLOW
    assert jsonsafe.value_end(text, 0) is None
    assert jsonsafe.value_end('["a\\"]", {"x": [1]}] tail', 0) == 20


def test_a_spilled_line_number_is_bounded():
    body = b'{"imported":{"file":"f","line":' + b"9" * 5000 + b"}}"
    assert import_repeats.line_number_of(body) == "?"


def test_the_device_index_of_a_long_devices_value(tmp_path):
    for devs in ("9" * 5000, "ROCm" + "1" * 60_000 + "x", "ROCm" + "1" * 60_000):  # ValueError / 192 s
        r = make_record("a", "rocm", n=128, avg=50.0, raw={"devices": devs})
        assert _timed(roofline.gpu_use, r) < SLOW
        use = roofline.gpu_use(r)
        assert use.count == 1 and not use.specs and len(use.note) < 400  # one device listed, which not known
    r = make_record("a", "rocm", n=128, avg=50.0, raw={"devices": "ROCm0"})
    assert roofline.gpu_use(r).count == 1


def test_the_numeric_text_reading_is_unchanged():
    got = [identity._text_value(t) for t in ("512", "-1", "0.50", "1e3", ".5", "5.", "f16", "1.2.3", "0x0")]
    assert got == [512, -1, 0.5, 1000, 0.5, 5, "f16", "1.2.3", "0x0"]
    assert readers._NUMBER.findall("[1.0, 2.5e3; -3 nan .5]") == ["1.0", "2.5e3", "-3", "nan", ".5"]
    assert plausible._NBA_RE.search("qwen3moe 30b.a3b q4_k").groups() == ("30", "3")
    assert plausible._NBA_RE.search("1234567b.a3b") is None  # no number cut out of a longer one


def test_vllm_log_notes_read_as_before():
    notes = vargs.log_notes(
        "INFO [x.py:1] Chunked prefill is enabled with max_num_batched_tokens=8192.\n"
        "INFO [y.py:2] Using Triton MoE backend\n"
        "INFO [z.py:3] KV cache size: 1,234,567 tokens\n"
        "INFO [w.py:4] Initializing a V1 LLM engine (v0.16) with config: model='m', quantization=fp8, x=1\n"
    )
    assert (notes["chunked_prefill_max_num_batched_tokens"], notes["moe_backend"]) == (8192, "Triton")
    assert (notes["kv_cache_tokens"], notes["quantization"]) == (1234567, "fp8")
    big = vargs.log_notes("Chunked prefill is enabled with max_num_batched_tokens=" + "9" * 5000)
    assert big["chunked_prefill_max_num_batched_tokens"] is None  # no ValueError


# ---------------------------------------------------------------- 3. tracebacks


def test_an_md_build_number_of_5000_digits_is_refused_like_30(tmp_path):
    table = (
        "| model | size | params | backend | threads | test | t/s |\n"
        "| --- | ---: | ---: | --- | ---: | ---: | ---: |\n"
        "| qwen3moe ?B F16 | 1.52 MiB | 0.79 M | CPU | 2 | pp64 | 37535.89 ± 32646.04 |\n\n"
    )
    for digits in (30, 5000):
        rows = readers.read_md(table + f"build: 0c1e57098 ({'9' * digits})\n")
        assert rows and all(
            "out of range" in (validity.check_row(r.fields, r.problem) or "") for r in rows
        ), digits


@pytest.mark.parametrize("docker", ["x", [1, 2], 5, None, {"server_version": {"x": 1}}])
def test_a_host_field_of_the_wrong_type_shows_nothing(docker):
    host = {"os": ["x"], "kernel": {"a": 1}, "cpu_model": 5, "docker": docker, "toolkit": "str"}
    line = provenance._host_line(host, ["GPU A"])
    assert line == "5; GPU GPU A; OS, kernel and GPU driver not recorded"


# ---------------------------------------------------------------- 4. free text bounded


def test_every_free_text_value_is_cut():
    big = "v" * 5_000_000
    host = {"os": big, "kernel": big, "cpu_model": big, "docker": {"server_version": big}}
    host["toolkit"] = {"version": big, "commit": "c" * 3_000_000}
    r = make_record("a", "rocm", n=128, avg=50.0, host=host, run_id="r" * 100_000, model="m" * 100_000)
    r.model.path = "/x/" + "f" * 100_000
    r.image.labels = {"org.toolkit.rocm-version": big, "org.toolkit.llama-cpp-commit": "d" * 10_000}
    lines = provenance.provenance([r]).lines()
    assert all(len(line) < 1200 for line in lines), [len(x) for x in lines]
    text = "\n".join(lines)
    assert (
        "v" * (provenance.TEXT_MAX - 1) + "…" in text and "(commit not recorded)" in text
    )  # 3,000,000 hex: no commit
    assert "runtime commit dddddddddddd," in text


def test_short_values_are_shown_whole():
    host = {
        "os": "Ubuntu 24.04",
        "kernel": "6.8.0",
        "toolkit": {"version": "0.1.0", "commit": "0123456789abcdef"},
    }
    r = make_record("a", "rocm", n=128, avg=50.0, host=host)
    text = "\n".join(provenance.provenance([r]).lines())
    assert "Ubuntu 24.04; kernel 6.8.0" in text and "toolkit 0.1.0 (commit 0123456789ab)" in text

"""A compressed llama-bench file (`llama-bench -o jsonl | gzip > run.jsonl.gz`, a zip of results, an
xz'd archive of a sweep) was refused as "not a text file (line 1, byte 1 is not UTF-8)" when small and
"no llama-bench result rows found" when over the streaming threshold: right to refuse, but neither
said what the file is or what to do. Every compression `file(1)` knows by its first bytes is named with
the command that unpacks it, at any size, and nothing is written."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import zipfile
from pathlib import Path

import pytest

from tests.support.runs import tk

ROOT = Path(__file__).resolve().parents[1]
RUN = (ROOT / "tests" / "data" / "cases43" / "llamabench-0c1e57098-cpu-t1-2.json").read_bytes()


def _zip(data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("run.json", data)
    return buf.getvalue()


PACKERS = {
    "gzip": (gzip.compress, "gunzip"),
    "xz": (lzma.compress, "unxz"),
    "bzip2": (bz2.compress, "bunzip2"),
    "zip": (_zip, "unzip"),
    # zstd: no packer in Python 3.11's standard library; its frame magic (RFC 8878, 3.1.1) and a body
    "zstd": (lambda data: b"\x28\xb5\x2f\xfd" + data, "unzstd"),
}


@pytest.mark.parametrize("kind", PACKERS)
def test_a_compressed_file_is_named_with_the_command_that_unpacks_it(tmp_path, kind):
    pack, unpack = PACKERS[kind]
    src = tmp_path / f"run.{kind}"
    src.write_bytes(pack(RUN))
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 4, res.stdout + res.stderr
    assert f"{src}: a {kind}-compressed file, not llama-bench's text output: unpack it (`{unpack} FILE`)" in (
        res.stderr
    )
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("bench.jsonl"))


def test_a_large_compressed_file_is_named_too(tmp_path):
    """Over the size where import reads a file as a stream (a first MiB of random bytes: gzip keeps
    them as large), the same words: was `no llama-bench result rows found`."""
    src = tmp_path / "big.jsonl.gz"
    src.write_bytes(gzip.compress(os.urandom(3 << 20), compresslevel=1))
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 4 and "a gzip-compressed file" in res.stderr, res.stderr


def test_text_that_starts_like_no_packer_is_still_read(tmp_path):
    src = tmp_path / "run.json"
    src.write_bytes(RUN)
    res = tk(ROOT, "import", str(src), "--results", str(tmp_path / "r"), "--label", "x")
    assert res.returncode == 0 and "imported 4 results" in res.stdout, res.stderr

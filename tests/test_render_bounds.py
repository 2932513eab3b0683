"""Render bounds: a template cannot take quadratic time in `build`'s FROM scan, recurse without end,
or build a string far over MAX_RENDERED_CHARS through `~`, `+`, `%`, str methods or filters, nor by
printing a container or text past it; what stays under the bound renders exactly as jinja2's own
sandbox renders it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jinja2
import pytest
import yaml
from click.testing import CliRunner
from jinja2.sandbox import SandboxedEnvironment

from toolkit.cli.main import cli
from toolkit.images.build import base_images
from toolkit.images.render import _environment


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def exit_code(res) -> int:
    """The exit code main() gives (CliRunner leaves a toolkit error as the exception)."""
    return getattr(res.exception, "exit_code", res.exit_code) if res.exception else res.exit_code


def _project_with(tmp_path: Path, body: str) -> Path:
    """A project whose `cpu` image renders evil.Dockerfile.j2 (the template `body`): its matrix.yaml."""
    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "Dockerfile.templates", tmp_path / "Dockerfile.templates")
    (tmp_path / "Dockerfile.templates" / "evil.Dockerfile.j2").write_text(body)
    data = yaml.safe_load((root / "matrix.yaml").read_text())
    for img in data["images"]:
        if img["name"] == "cpu":
            img["template"] = "evil.Dockerfile.j2"
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path / "matrix.yaml"


def test_from_scan_is_linear_on_a_megabyte():
    """`^\\s*FROM` with re.MULTILINE ran across newlines from every line start: 40,000 blank lines
    took 17 s, a megabyte hours. Run in a child so the old pattern fails in 20 s, not hangs."""
    code = (
        "import time; from toolkit.images.build import base_images\n"
        "t = time.monotonic(); base_images('FROM a\\n' + '\\n' * 1_000_000 + ' \\t' * 1000)\n"
        "print(time.monotonic() - t)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) < 1.0


def test_from_scan_still_reads_indented_stages_and_aliases():
    text = "  FROM --platform=linux/amd64 debian:trixie AS build\n\tfrom build AS final\nRUN x FROM y\n"
    assert base_images(text) == ["debian:trixie"]


@pytest.mark.parametrize(
    "body",
    [
        "{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}",
        "FROM x\n{% include 'evil.Dockerfile.j2' %}",
    ],
)
def test_a_template_that_recurses_without_end_is_bad_input(tmp_path, body):
    """A RecursionError traceback (exit 1) before; now exit 4 naming the template."""
    res = run("render", "--matrix", str(_project_with(tmp_path, body)), "-i", "cpu")
    assert exit_code(res) == 4, (res.output, repr(res.exception))
    assert "evil.Dockerfile.j2" in str(res.exception) and "calls itself" in str(res.exception)


LARGE = [
    "{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
    "{{ ns.s|length }}",
    "{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
    "{{ ns.s|length }}",
    "{{ '%0300000000d' % 1 }}",
    "{{ '%.300000000d' % 1 }}",
    "{{ '%*d' % (300000000, 1) }}",
    "{{ '%(a)0300000000d' % {'a': 1} }}",
    "{{ '%0300000000d'|format(1) }}",
    "{{ 'x'|center(300000000) }}",
    "{{ ('x\n' * 1000)|indent(1000000) }}",
    "{{ ('x ' * 1000)|wordwrap(1, wrapstring='y' * 10000) }}",
    "{{ ('x' * 1000)|replace('x', 'y' * 10000) }}",
    "{{ (['x' * 1000] * 2000)|join }}",
    "{{ ''.join(['x' * 1000] * 2000) }}",
    "{{ ('x' * 1000).replace('x', 'y' * 10000) }}",
    "{{ '{:0300000000}'.format(1) }}",
    "{{ '{:{w}}'.format(1, w=300000000) }}",
    "{% set l = [1] %}{% for i in range(30) %}{{ l.extend(l) }}{% endfor %}{{ l|length }}",
]


@pytest.mark.parametrize("body", LARGE)
def test_a_template_that_builds_a_huge_string_is_refused_at_once(tmp_path, body):
    """Each took 1.5 GB or more before the 10-s deadline; now exit 4 naming the template, at once."""
    t0 = time.monotonic()
    res = run("render", "--matrix", str(_project_with(tmp_path, "FROM x\n" + body)), "-i", "cpu")
    assert exit_code(res) == 4, (res.output, repr(res.exception))
    assert "evil.Dockerfile.j2" in str(
        res.exception
    ) and "builds a string or list of more than 1,048,576" in str(res.exception)
    assert time.monotonic() - t0 < 3


SMALL = [
    "{{ 'a' ~ 'b' ~ 3 ~ [1, 2] ~ none }}",
    "{{ 'a' + 'b' }}{{ [1] + [2] }}{{ 7 % 3 }}{{ 2 + 3 }}",
    "{{ '%s-%05.2f-%x-%%' % ('a', 2.5, 255) }}{{ '%(k)s' % {'k': 1} }}{{ '%*d' % (4, 1) }}",
    "{{ '%d-%s'|format(3, 'x') }}{{ '{}-{:>4}-{k}'.format(1, 2, k=3) }}{{ '{a}'.format_map({'a': 1}) }}",
    "{{ 'x'|center(9) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\nb'|indent('> ', blank=true) }}",
    "{{ 'hello world foo bar'|wordwrap(5) }}|{{ 'a b c'|wordwrap(1, wrapstring='<br>') }}",
    "{{ [1, 2]|join(',') }}|{{ [{'a': 1}, {'a': 2}]|join('-', attribute='a') }}|{{ (range(3))|join }}",
    "{{ 'abcb'|replace('b', 'XX') }}|{{ 'abcb'|replace('b', 'XX', 1) }}|{{ 'ab'.replace('', '-') }}",
    "{{ 'abcdef ghij'|truncate(9, end='..', leeway=0) }}|{{ ', '.join(['a', 'b']) }}",
    "{% set l = [1] %}{{ l.extend([2, 3]) }}{{ l }}{{ 'x' * 1000 ~ 'y' * 1000 }}",
]


@pytest.mark.parametrize("body", SMALL)
def test_what_stays_under_the_bound_renders_as_jinja_renders_it(body):
    ours = _environment(Path("/nonexistent")).from_string(body).render()
    plain = SandboxedEnvironment(undefined=jinja2.StrictUndefined).from_string(body).render()
    assert ours == plain


PRINTED = [
    '{{ ["x" * 900000] * 2000 }}',
    '{% set a = ["y" * 1000000] * 5000 %}{{ a }}',
    '{% set s = "x" * 900000 %}{% for i in range(2000) %}{{ s }}{% endfor %}',
    '{% macro m() %}{% for i in range(2000) %}{{ "x" * 900000 }}{% endfor %}{% endmacro %}{{ m()|length }}',
    '{% set b %}{% for i in range(2000) %}{{ "x" * 900000 }}{% endfor %}{% endset %}{{ b|length }}',
    '{% filter length %}{% for i in range(2000) %}{{ "x" * 900000 }}{% endfor %}{% endfilter %}',
    '{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}{% for i in range(2000) %}{{ "x" * 900000 }}'
    "{% endfor %}{% endcall %}",
    '{{ (["x" * 900000] * 2000)|string|length }}',
    '{{ (["x" * 900000] * 2000)|tojson|length }}',
    '{{ (["x" * 900000] * 2000)|pprint|length }}',
    '{{ (["x" * 900000] * 2000)|e|length }}',
    '{{ (["x" * 900000] * 2000)|upper|length }}',
    '{{ dict(a=["x" * 900000] * 2000).items() }}',
    '{{ dict(a=["x" * 900000] * 2000).values() }}',
    '{{ namespace(a=["x" * 900000] * 2000) }}',
    '{{ "%s" % namespace(a=["x" * 900000] * 2000) }}',
]

_CHILD = """
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # the code before the bound: MemoryError, not swap
sys.argv = ["toolkit", *sys.argv[1:]]
try:
    runpy.run_module("toolkit", run_name="__main__")
finally:
    # VmHWM: this process image's own peak (ru_maxrss keeps the forking pytest's RSS across exec: 351 MB
    # late in a long session, whatever the render did)
    hwm = next(ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
    print("peak-rss-mb", int(hwm.split()[1]) // 1024, file=sys.stderr)
"""


@pytest.mark.parametrize("body", PRINTED)
def test_printing_a_container_or_text_past_the_bound_is_refused_before_it_is_built(tmp_path, body):
    """`{{ ["x" * 900000] * 2000 }}` is a list of 2,000 references to one string (the `*` bound counts
    items): printing it made its 1.8 GB text before the output bound looked at it (0.7-1.8 GB RSS, then
    the 10-s deadline); so did a loop printing the string 2,000 times (the join of the output), a
    macro's, a call, filter or set block's text (jinja joins each block's output first), |string,
    |tojson, |pprint, |e, |upper of the list, a dict's items() or values(), a namespace (whose size
    raised TypeError). Now: exit 4 naming the template, in a child of small RSS."""
    matrix = _project_with(tmp_path, "FROM x\n" + body)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "render", "--matrix", str(matrix), "-i", "cpu"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 4, proc.stderr
    assert "evil.Dockerfile.j2" in proc.stderr and "more than 1,048,576" in proc.stderr, proc.stderr
    peak_mb = int(proc.stderr.rsplit("peak-rss-mb", 1)[1])
    assert peak_mb < 200, proc.stderr

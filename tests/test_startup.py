"""The toolkit's own cost (issue 32 items 14 and 16). Start-up: a command imports what its path needs;
each check runs the command in a fresh interpreter and reads `sys.modules` at its end, so an import
that comes back at the top of a module the path loads fails here, whatever the machine's speed. While
a benchmark runs: the progress bar on a terminal redraws on its events and once a second, not ten
times a second (counted frames, on a real pseudo-terminal)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys

from toolkit.cli.main import COMMANDS, cli

# what a command path that reads no record, validates no matrix and talks to no engine must not load
HEAVY = (
    "pydantic",
    "yaml",
    "jinja2",
    "docker",
    "requests",
    "sqlite3",
    "numpy",
    "tabulate",
    "toolkit.analysis",
    "toolkit.results.records",
    "toolkit.results.index",
    "toolkit.matrix",
    "toolkit.engine",
    "toolkit.bench",
)
OTHER_COMMANDS = tuple(sorted({module for module, _ in COMMANDS.values()}))


def _modules_after(args: list[str], cwd) -> tuple[subprocess.CompletedProcess, list[str]]:
    """(the process, every module loaded when `toolkit ARGS` ended) in a fresh interpreter."""
    code = (
        "import json, sys\n"
        "from toolkit.cli.main import main\n"
        f"sys.argv = ['toolkit', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120)
    return p, json.loads(p.stderr.strip().splitlines()[-1])


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_an_empty_report_loads_no_report_stack_no_store_and_no_other_command(tmp_path):
    """Reproducer (issue 32 item 14): an empty `report` imported the report stack, the store's pydantic
    models and every command module to say there is nothing. Empty: no bench.jsonl, or only empty ones."""
    results = tmp_path / "results"
    (results / "abc").mkdir(parents=True)
    (results / "abc" / "bench.jsonl").write_text("")
    p, modules = _modules_after(["report", "--results", str(results)], tmp_path)
    said = "no results yet: run `toolkit build && toolkit bench` or `toolkit import FILE --label NAME`"
    assert p.stdout.strip() == said, p.stderr[-500:]
    assert _loaded(modules, HEAVY) == []
    assert _loaded(modules, OTHER_COMMANDS) == ["toolkit.cli.results"]


def test_a_command_loads_its_own_command_module_only(tmp_path):
    """`toolkit bench --help` imports toolkit.cli.bench and none of the six other command modules
    (issue 32 item 16: each was imported, with what it imports at its top, by every command)."""
    p, modules = _modules_after(["bench", "--help"], tmp_path)
    assert p.returncode == 0 and "Usage:" in p.stdout, p.stderr[-500:]
    assert _loaded(modules, OTHER_COMMANDS) == ["toolkit.cli.bench"]


def test_every_command_is_listed_without_loading_it_and_loads_under_its_name(tmp_path):
    """The root group's table (toolkit.cli.main.COMMANDS) names each command as its module defines it,
    in the order `toolkit --help` lists them; listing the names loads no command module."""
    code = (
        "import json, sys\nfrom toolkit.cli.main import cli\n"
        "names = sorted(cli.commands)\n"
        "print(json.dumps([names, 'bench' in cli.commands, 'nosuch' in cli.commands, "
        "[m for m in sys.modules if m.startswith('toolkit.cli.') and m not in "
        "('toolkit.cli.main', 'toolkit.cli.common')]]))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    names, has_bench, has_nosuch, loaded = json.loads(p.stdout)
    assert names == sorted(COMMANDS) and has_bench and not has_nosuch and loaded == []
    for name in COMMANDS:
        assert cli.commands[name].name == name
    assert cli.commands.get("nosuch") is None


def test_the_progress_bar_draws_each_event_at_once_and_redraws_once_a_second():
    """On a terminal, bench's rich bar redrew ten times a second (~18 ms of CPU per second of the run
    here, more than the rest of the toolkit while llama-bench measures) and showed an event only at
    the next tick (three quick events: only the last was ever drawn). Now: each event drawn at once,
    and 2 s of waiting redraw the clock about twice (frames counted on a pseudo-terminal)."""
    code = (
        "import time\nfrom toolkit.cli.progress import progress_printer\n"
        "ev = progress_printer(quiet=False)\n"
        "ev('start', image='cpu', model='tiny', total=3)\n"
        "for i in range(3):\n    ev('progress', image='cpu', model='tiny', done=i, total=3, phase='starting')\n"
        "time.sleep(2.0)\nev('done', image='cpu', model='tiny', total=3)\nev('close')\n"
    )
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    out = b""
    while select.select([master], [], [], 30)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=30) == 0
    text = out.decode(errors="replace")
    frames = [f for f in text.split("\x1b[2K") if "cpu x tiny" in f]
    assert all(f"test {k}/3 starting" in text for k in (1, 2, 3)), text[-500:]
    assert len(frames) <= 12, f"{len(frames)} frames in 2 s"

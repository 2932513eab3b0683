"""Build-time benchmark (not a test): cold, no-change and one-file-change rebuild of one image.

    python3 benchmarks/build_times.py --image cpu [--matrix matrix.yaml] [--skip-cold]

Works on a temporary project whose llama.cpp source is a local copy (`path:` source), so the
one-file change is a real edit of the source tree. "Cold" clears BuildKit's cache mounts and builds
with --no-cache (so it also clears the apt cache mounts of other images: run it on a build host).
Target from issue 2: the one-file rebuild takes <= 10% of the cold build.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EDIT = "tools/llama-bench/llama-bench.cpp"


def toolkit(project: Path, *args: str) -> float:
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "toolkit", args[0], "--matrix", str(project / "matrix.yaml"), *args[1:]],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default="cpu")
    ap.add_argument("--matrix", default=str(ROOT / "matrix.yaml"))
    ap.add_argument("--skip-cold", action="store_true", help="measure only the two rebuilds")
    a = ap.parse_args()

    from toolkit.images.sources import prepare_source
    from toolkit.matrix.api import load_matrix

    lm = load_matrix(a.matrix)
    spec = lm.m.image(a.image)
    src = prepare_source(lm, spec.source)
    work = Path(tempfile.mkdtemp(prefix="toolkit-buildbench-"))
    shutil.copytree(src.path, work / "llama.cpp", symlinks=True, ignore=shutil.ignore_patterns(".git"))
    shutil.copytree(ROOT / "Dockerfile.templates", work / "Dockerfile.templates")
    data = yaml.safe_load(Path(a.matrix).read_text())
    data["sources"] = {spec.source: {"path": str(work / "llama.cpp"), "commit": src.commit}}
    data["images"] = [i for i in data["images"] if i["name"] == a.image]
    (work / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))

    out: dict[str, float] = {}
    if not a.skip_cold:
        subprocess.run(
            ["docker", "buildx", "prune", "-f", "--filter", "type=exec.cachemount"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        out["cold_s"] = toolkit(work, "build", "--image", a.image, "--no-cache")
    else:
        toolkit(work, "build", "--image", a.image)
    out["no_change_s"] = toolkit(work, "build", "--image", a.image)
    f = work / "llama.cpp" / EDIT
    f.write_text(f.read_text() + "\n// toolkit build benchmark: one-file change\n")
    out["one_file_change_s"] = toolkit(work, "build", "--image", a.image)
    if "cold_s" in out:
        out["one_file_over_cold"] = round(out["one_file_change_s"] / out["cold_s"], 3)
    print(
        json.dumps({"image": a.image, **{k: round(v, 1) if k.endswith("_s") else v for k, v in out.items()}})
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

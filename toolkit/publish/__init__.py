"""Sharing: push images and export results folders (push.py), reproduce someone's published run.
Published folders are untrusted input: every path read from one stays inside it.
May use: toolkit.core..bench; Docker only through toolkit.engine; never prints.
"""

from pathlib import Path

REPRODUCED = Path("reproduce", "results")
"""Where `toolkit reproduce` keeps the runs it measures, inside the published run's folder (its work folder,
then results/): `report --results` / `compare --results` read them there."""

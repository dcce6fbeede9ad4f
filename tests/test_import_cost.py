"""Loading the code location does not import what only some runs need (issue 14/15).

Every process that loads `orchestration.definitions` (a CLI command, the daemon's run worker, a
Celery task, a test subprocess) pays its imports. matplotlib (plots), scipy.stats (drift and
serving tests) and evidently (drift reports) are imported by the code that uses them, when it runs:
~2 CPU-s of a 4.6 CPU-s load (BENCHMARKS.md section 27); scipy.cluster by nothing any more (the
fold's union-find is its own, assets/correlation.py).
"""

import json
import os
import subprocess
import sys

from tests.helpers import REPO

HEAVY = ("matplotlib", "scipy.cluster", "scipy.stats", "scipy.spatial", "evidently")


def test_loading_the_code_location_imports_no_plotting_or_statistics_library():
    probe = ("import json, sys; import orchestration.definitions; "
             f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_plots_still_draw_once_asked_for():
    """The lazy import still works where it is used: the plotting module brings matplotlib with it."""
    probe = ("import sys; from orchestration.plots import run_plot; import pandas as pd; "
             "png = run_plot(pd.DataFrame({'minute': pd.date_range('2026-01-01', periods=3, freq='min'), "
             "'loss': [1.0, 0.9, 0.8]})); print(png[:4] == b'\\x89PNG' and 'matplotlib' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True"

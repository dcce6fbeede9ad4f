"""Fold cost follows the new findings: the full refold against the incremental fold on one warehouse.

    python bench/bench_fold.py WAREHOUSE.duckdb [--out FILE.json]

On a copy of a processed warehouse (e.g. a `goodput demo` home's): the full fold
(`incidents.fold`, what every fold did before issue 15), then the incremental fold
(assets/incidents_incremental.py) from an empty state (every group folded), with nothing new (no
group folded), and after one finding of the last partition is changed and the partition marked as
the checks mark it (one group folded). CPU-seconds and wall per fold, the fold's and store's
together; the stored incidents equal the full fold's. bench/bench_fold_history.py: the fold per
tick against days of history.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    import pandas as pd

    from assets import incident_fold as full
    from assets.incidents_incremental import clear_state, fold_incrementally
    from orchestration.storage import sql
    from orchestration.storage.warehouse import WarehouseResource

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse")
    parser.add_argument("--out")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="goodput-bench-fold-")) / "w.duckdb"
    shutil.copy(args.warehouse, work)
    warehouse = WarehouseResource(path=str(work))
    lifecycle = full.Lifecycle()
    rows = []

    def timed(name, fn):
        cpu, wall = time.process_time(), time.monotonic()
        out = fn()
        counts = out if isinstance(out, dict) else {}
        rows.append({"fold": name, "cpu_s": round(time.process_time() - cpu, 3), "wall_s": round(time.monotonic() - wall, 3),
                     **{k: v for k, v in counts.items() if isinstance(v, (int, float, bool))}})
        return out

    with warehouse.connect() as con:
        versions = sql.frame(con, "incidents/serving_versions")

        def full_fold():
            return full.fold(sql.frame(con, "incidents/findings"), sql.frame(con, "incidents/evaluations"), lifecycle,
                             versions=versions, clearings=sql.frame(con, "incidents/clearings"))

        def incremental():
            return fold_incrementally(con, lifecycle, versions, full.triage.WINDOW_SECONDS)

        def stored():
            return con.execute("SELECT incident_id, status FROM incidents ORDER BY incident_id").df()

        reference = timed("full refold", full_fold)[0]
        clear_state(con)
        timed("incremental, empty state", incremental)
        first = stored()
        timed("incremental, nothing new", incremental)
        same = stored()
        last = con.execute("SELECT max(partition_start) FROM findings").fetchone()[0]
        con.execute("""UPDATE findings SET value = value + 1e-9
                       WHERE rowid = (SELECT max(rowid) FROM findings WHERE partition_start = $p)""", {"p": last})
        con.execute("INSERT INTO fold_marks SELECT DISTINCT signal, partition_start FROM findings WHERE partition_start = $p",
                    {"p": last})   # as the checks' store marks what it writes
        timed("incremental, one finding changed", incremental)
        changed = stored()
        after = timed("full refold after the change", full_fold)[0]
    for got, want in ((first, reference), (same, reference), (changed, after)):
        assert got["incident_id"].tolist() == sorted(want["incident_id"])
        assert got["status"].tolist() == want.sort_values("incident_id")["status"].tolist()
    table = pd.DataFrame(rows)
    print(table.to_markdown(index=False))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

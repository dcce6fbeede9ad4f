"""CPU seconds of every check step on one already-ingested hour, as the detect job runs them (the signals
of one asset in registry order on one connection, what they read alike read once), in this process. It
imports whatever tree is on PYTHONPATH, so two trees are compared side by side by running it alternately
with each, on fresh copies of one warehouse:

    python bench/bench_tick.py --scenario bench/scenarios/scale_1024.yaml --home H      # one ingested hour
    for i in 1 2 3; do for tree in OLD NEW; do cp H/bench.duckdb /tmp/w.duckdb
        PYTHONPATH=$tree python bench/bench_check_cpu.py /tmp/w.duckdb $tree; done; done

Prints one line per run: the label, the total and each step's CPU-s. Trees before 5b11dc0 passed the
hour's absent GPUs in (`absent`) and read each series frame per signal: that is how they are run.
"""

import inspect
import sys
import time

import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from checks import asset_checks
from checks.asset_checks import evaluate_judged
from checks.registry import REGISTRY
from orchestration.storage.warehouse import WarehouseResource


def steps() -> dict:
    if hasattr(asset_checks, "signals_by_step"):
        return asset_checks.signals_by_step()
    by_asset: dict[str, list] = {}   # an older tree
    for signal in REGISTRY:
        by_asset.setdefault(signal.asset, []).append(signal)
    return by_asset


def main() -> int:
    warehouse, label = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    hour = pd.Timestamp(sys.argv[3] if len(sys.argv) > 3 else "2026-11-30 00:00")
    start, end = hour.to_pydatetime(), (hour + pd.Timedelta(hours=1)).to_pydatetime()
    takes = inspect.signature(evaluate_judged).parameters
    cpu = {}
    with WarehouseResource(path=warehouse).connect() as con:
        for asset, signals in steps().items():
            t0, step = time.process_time(), {}
            if "frames" in takes:
                step["frames"] = {}
            if "absent" in takes and any(s.entity == "gpu" for s in signals):
                step["absent"] = asset_checks.absent_gpus(con, start, end)
            for signal in signals:
                evaluate_judged(con, signal, start, end, None, **step)
            cpu[asset] = round(time.process_time() - t0, 2)
    print(label, round(sum(cpu.values()), 2), cpu, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

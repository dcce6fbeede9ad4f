"""CPU seconds of every check step on one already-ingested hour, as the detect job runs them (the signals
of one asset in registry order on one connection, the hour's absent GPUs read once, series frames shared
where the tree's checks share them), in this process. It imports whatever tree is on PYTHONPATH, so two
trees are compared side by side by running it alternately with each, on fresh copies of one warehouse:

    python bench/bench_tick.py --scenario bench/scenarios/scale_1024.yaml --home H      # one ingested hour
    for i in 1 2 3; do for tree in OLD NEW; do cp H/bench.duckdb /tmp/w.duckdb
        PYTHONPATH=$tree python bench/bench_check_cpu.py /tmp/w.duckdb $tree; done; done

Prints one line per run: the label, the total and each step's CPU-s.
"""

import inspect
import sys
import time

import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from checks.asset_checks import absent_gpus, evaluate_judged
from checks.registry import REGISTRY
from orchestration.warehouse import WarehouseResource


def main() -> int:
    warehouse, label = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    hour = pd.Timestamp(sys.argv[3] if len(sys.argv) > 3 else "2026-11-30 00:00")
    start, end = hour.to_pydatetime(), (hour + pd.Timedelta(hours=1)).to_pydatetime()
    shares = "frames" in inspect.signature(evaluate_judged).parameters   # trees before 5b11dc0 read each frame
    steps: dict[str, list] = {}
    for signal in REGISTRY:
        steps.setdefault(signal.asset, []).append(signal)
    cpu = {}
    with WarehouseResource(path=warehouse).connect() as con:
        for asset, signals in steps.items():
            t0, frames, absent = time.process_time(), {}, None
            for signal in signals:
                if signal.entity == "gpu" and absent is None:
                    absent = absent_gpus(con, start, end)
                evaluate_judged(con, signal, start, end, None, absent, **({"frames": frames} if shares else {}))
            cpu[asset] = round(time.process_time() - t0, 2)
    print(label, round(sum(cpu.values()), 2), cpu, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

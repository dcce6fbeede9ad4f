"""Incremental ingest == whole-hour ingest: the raw files of an hour grow by random splits (a line
cut across two ticks included), each tick reads only what arrived, and the tables, quarantine and
ingest log end as one read of the whole hour leaves them; a re-run changes nothing; a rewritten
or truncated file falls back to replacing the hour."""

import random
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from assets.ingest import SOURCES
from assets.ingest_incremental import ingest_hour
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import WarehouseResource

START = datetime(2026, 11, 30, 0)
END = START + timedelta(hours=1)
TABLES = ["gpu_samples", "training_steps", "lineage_events", "serving_metrics", "predictions", "prediction_outcomes"]


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Path:
    from simulator import load_scenario, simulate

    root = tmp_path_factory.mktemp("staged")
    simulate(load_scenario(Path(__file__).resolve().parent.parent / "simulator" / "scenarios" / "small.yaml"), root)
    return root


def ingest_all(warehouse: WarehouseResource, raw: Path, incremental: bool) -> list[dict]:
    zone = RawZoneResource(root=str(raw))
    with warehouse.connect() as con:
        return [ingest_hour(con, s, zone.files(s.folder, START), START, END, incremental) for s in SOURCES]


def snapshot(warehouse: WarehouseResource) -> dict[str, pd.DataFrame]:
    out = {}
    with warehouse.connect(read_only=True) as con:
        for table in TABLES:
            out[table] = con.execute(f"SELECT * EXCLUDE (payload) FROM {table} ORDER BY source_file, source_line"
                                     if table == "lineage_events" else
                                     f"SELECT * FROM {table} ORDER BY source_file, source_line").df()
        out["lineage_payload"] = con.execute(
            "SELECT source_file, source_line, payload::VARCHAR AS p FROM lineage_events ORDER BY 1, 2").df()
        out["quarantine"] = con.execute("SELECT * FROM quarantine ORDER BY source, file, line").df()
        out["ingest_files"] = con.execute("SELECT * FROM ingest_files ORDER BY source, file").df()
    return out


def assert_same(a: dict, b: dict) -> None:
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], check_dtype=False, obj=name)


def hour_files(raw: Path) -> list[Path]:
    return sorted(p for p in raw.rglob("*.jsonl") if p.parent.name == "00")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_ingest_equals_whole_hour_after_random_appends(staged, tmp_path, seed):
    rng = random.Random(seed)
    raw = tmp_path / "raw"
    finals = {p.relative_to(staged / "raw"): p.read_bytes() for p in hour_files(staged / "raw")}
    # Random cut points per file, at least one in the middle of a line.
    cuts = {}
    for rel, data in finals.items():
        points = sorted(rng.sample(range(1, len(data)), k=min(3, len(data) - 1))) if len(data) > 2 else []
        newline = data.find(b"\n")
        if 2 < newline:
            points = sorted(set(points) | {newline // 2})   # a line split across two ticks
        # and the first two ticks end on line ends: the next one reads on from a newline, forgetting nothing
        ends = [i + 1 for i in range(len(data) - 1) if data[i] == 10][:2]
        cuts[rel] = sorted({0, *ends, *points, len(data)})
    incremental = WarehouseResource(path=str(tmp_path / "incremental.duckdb"))
    ticks = max(len(c) for c in cuts.values()) - 1
    forgot = set()   # whether a tick read a line again (the last read ended inside it) or only new lines
    for tick in range(ticks):
        for rel, points in cuts.items():
            if tick + 1 < len(points):
                target = raw / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "ab") as out:
                    out.write(finals[rel][points[tick]:points[tick + 1]])
        results = ingest_all(incremental, raw, incremental=True)
        if tick:
            assert {r["parse"] for r in results} <= {"appended", "nothing new"}, results
            forgot |= {r["forgot"] for r in results if r["parse"] == "appended"}
    assert forgot == {True, False}
    whole = WarehouseResource(path=str(tmp_path / "whole.duckdb"))
    ingest_all(whole, raw, incremental=False)
    expected = snapshot(whole)
    assert len(expected["gpu_samples"]) > 0 and len(expected["training_steps"]) > 0
    assert_same(snapshot(incremental), expected)
    # A re-run at the same offsets reads nothing and changes nothing.
    assert {r["parse"] for r in ingest_all(incremental, raw, incremental=True)} == {"nothing new"}
    assert_same(snapshot(incremental), expected)


def test_a_truncated_or_rewritten_file_replaces_the_hour(staged, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(staged / "raw", raw)
    warehouse = WarehouseResource(path=str(tmp_path / "w.duckdb"))
    ingest_all(warehouse, raw, incremental=True)
    target = sorted((raw / "training_steps").rglob("00/*.jsonl"))[0]
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])            # truncated
    results = ingest_all(warehouse, raw, incremental=True)
    assert results[1]["parse"] in ("fast", "full")        # training_steps: replaced whole
    lines = data.splitlines(keepends=True)
    target.write_bytes(b"".join(reversed(lines)))         # rewritten: the same lines in another order, longer again
    results = ingest_all(warehouse, raw, incremental=True)
    assert results[1]["parse"] in ("fast", "full")
    whole = WarehouseResource(path=str(tmp_path / "whole.duckdb"))
    ingest_all(whole, raw, incremental=False)
    assert_same(snapshot(warehouse), snapshot(whole))

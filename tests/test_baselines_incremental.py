"""Incremental baselines == whole-hour baselines (issue 15 item 2).

Two hours of the small scenario arrive as a live cluster's do: every raw file grows tick by tick at
random cut points (a line split across two ticks included), and the last minutes of the first hour's
GPU samples arrive late, after the second hour has begun. At each tick the hours with new bytes are
ingested (only what arrived) and their per-minute series recomputed the live way: only from the first
minute ingest marked dirty. At the end every series table equals what one whole read and one whole
computation of each hour give, and the live ticks did recompute less than whole hours."""

import random
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from assets.baselines import GPU_SERIES, replace_series
from assets.ingest import SOURCES
from assets.ingest_incremental import ingest_hour
from orchestration.storage import sql
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import WarehouseResource

START = datetime(2026, 11, 30, 0)
HOURS = [START, START + timedelta(hours=1)]
SERIES = {"training_steps": ("run_minutes", "rank_minutes", "step_ends"), "gpu_samples": GPU_SERIES}
WINDOW = 30


def run_hour(con, raw: Path, start: datetime, live: bool) -> dict:
    """What a detect run does for these tables: ingest every source, then the series."""
    zone = RawZoneResource(root=str(raw))
    for source in SOURCES:
        ingest_hour(con, source, zone.files(source.folder, start), start, start + timedelta(hours=1), incremental=live)
    return {table: replace_series(con, table, names, start, start + timedelta(hours=1), WINDOW, live)
            for table, names in SERIES.items()}


def series(warehouse: WarehouseResource) -> dict[str, pd.DataFrame]:
    keys = {"run_minutes": "run_id, minute", "rank_minutes": "run_id, rank, minute", "gpu_minutes": "host, gpu_index, minute",
            "step_ends": "run_id, step, minute", "gpu_counter_minutes": "host, gpu_index, minute"}
    with warehouse.connect(read_only=True) as con:
        return {name: con.execute(f"SELECT * FROM {name} ORDER BY {order}").df() for name, order in keys.items()}


def arrivals(staged: Path, rng: random.Random) -> list[dict[Path, bytes]]:
    """The bytes each raw file of the two hours gains at each tick: 5 random cuts per file, one
    inside a line; the first hour's GPU sample files hold back their last 15% until tick 7, when
    the second hour has been growing for a while. Ticks 8 and 9 bring nothing (the test runs both
hours then: hour 1 for the late tail its windows read, then nothing to do)."""
    ticks: list[dict[Path, bytes]] = [{} for _ in range(10)]
    for path in sorted(p for p in (staged / "raw").rglob("*.jsonl") if p.parent.name in ("00", "01")):
        data, rel = path.read_bytes(), path.relative_to(staged)
        late = rel.parts[1] == "gpu_samples" and rel.parent.name == "00"
        body = data[: int(len(data) * 0.85)] if late else data
        newline = body.find(b"\n")
        points = sorted(set(rng.sample(range(1, len(body)), k=min(5, len(body) - 1))) | {max(1, newline // 2)})
        first_tick = 0 if rel.parent.name == "00" else 3
        cuts = [0, *points, len(body)]
        for i in range(len(cuts) - 1):
            tick = min(first_tick + i, 6)
            ticks[tick][rel] = ticks[tick].get(rel, b"") + body[cuts[i]:cuts[i + 1]]
        if late:
            ticks[7][rel] = data[len(body):]
    return ticks   # ticks 8 and 9 bring nothing: both hours run again (see the test)


@pytest.mark.parametrize("seed", [11, 12])
def test_live_series_recomputed_from_the_changed_minutes_equal_whole_hours(small_raw_zone, tmp_path, seed):
    rng = random.Random(seed)
    home = tmp_path / "live"
    live = WarehouseResource(path=str(tmp_path / "live.duckdb"))
    partial = 0
    for tick, grown in enumerate(arrivals(small_raw_zone, rng)):
        for rel, chunk in grown.items():
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            with open(home / rel, "ab") as out:
                out.write(chunk)
        changed = sorted({h for h in HOURS if any(r.parent.name == f"{h:%H}" for r in grown)}) or HOURS
        with live.connect() as con:
            for hour in changed:   # the sensor's requests: the hours with new bytes, oldest first
                done = run_hour(con, home / "raw", hour, live=True)
                partial += sum(1 for r in done.values() if r["recomputed_from"] not in (str(hour), "nothing changed"))
                if tick == 8 and hour == HOURS[1]:   # its trailing windows read hour 0's late tail
                    assert done["gpu_samples"]["recomputed_from"] == str(HOURS[1])
                if tick == 9:   # nothing new since: a live run changes nothing
                    assert {r["recomputed_from"] for r in done.values()} == {"nothing changed"}
        if tick == 7:   # hour 0's late tail reached into hour 1's trailing windows: marked from its start
            with live.connect(read_only=True) as con:
                dirty = sql.frame(con, "baselines/dirty", {"source": "gpu_samples", "start": HOURS[1]})
            assert pd.Timestamp(dirty["dirty_from"].iloc[0]) == pd.Timestamp(HOURS[1])
    whole = WarehouseResource(path=str(tmp_path / "whole.duckdb"))
    with whole.connect() as con:
        for hour in HOURS:
            run_hour(con, home / "raw", hour, live=False)
    expected = series(whole)
    assert all(len(frame) > 60 for frame in expected.values())
    got = series(live)
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(got[name], frame, obj=name)
    assert partial >= 4, "the live ticks recomputed whole hours only"


def test_a_write_dirties_the_next_hour_only_where_its_trailing_windows_read_it(tmp_path):
    from assets.ingest_incremental import mark_changed

    warehouse = WarehouseResource(path=str(tmp_path / "w.duckdb"))
    with warehouse.connect() as con:
        for hour in HOURS:
            con.execute("INSERT INTO baseline_dirty VALUES ('gpu_samples', ?, NULL, ?)", [hour, WINDOW])

        def dirty() -> list:
            return [r[0] for r in con.execute(
                "SELECT dirty_from FROM baseline_dirty WHERE source = 'gpu_samples' ORDER BY partition_start").fetchall()]

        mark_changed(con, "gpu_samples", START + timedelta(minutes=10, seconds=20), START + timedelta(minutes=20))
        assert dirty() == [START + timedelta(minutes=10), None]   # 00:20 + 30 min is still in hour 0
        mark_changed(con, "training_steps", START + timedelta(minutes=5), START + timedelta(minutes=50))
        assert dirty() == [START + timedelta(minutes=10), None]   # another table's series
        mark_changed(con, "gpu_samples", START + timedelta(minutes=40), START + timedelta(minutes=45))
        assert dirty() == [START + timedelta(minutes=10), HOURS[1]]   # 00:45 is in 01:00-01:15's windows

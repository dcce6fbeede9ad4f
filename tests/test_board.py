"""The incident board over real warehouses, served by uvicorn on loopback, and the accounting behind it.

- totals count one hang once: two correlated incidents on the same GPUs add their GPU-hours once
  (the view `open_incident_groups`, the Now page, the `incidents` check and the asset's metadata);
- a staleness alert (the real `goodput_staleness` sensor) is listed as an open incident, and leaves
  the list when it resolves;
- every board link in an alert payload (the real `incident_alerts` sensor on the small scenario)
  answers 200 from the board; a drift report is served with a header naming what it compares;
- a held write lock answers "warehouse busy, retry" (503), never a 500.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets.incidents import incidents
from checks.incident_checks import no_open_sev1_sev2, verdict
from orchestration.board_resource import BoardResource
from orchestration.definitions import resources_for
from orchestration.sensors import alerts as sensors
from orchestration.storage.warehouse import WarehouseResource
from tests.helpers import HOLDER, LiveBoard, _hang, _store, copy_home, evaluated, memory_instance, text_of

T0 = pd.Timestamp("2026-11-30 00:50:00")


# ------------------------------------------------------------------------------------- one hang counted once


def _incident(iid, signal, onset, last_seen, gpus, correlation, tier="SEV1", run="llm-x"):
    return {"incident_id": iid, "signal": signal, "family": "training", "tier": tier, "status": "open",
            "title": f"{signal}: run {run}", "onset": onset, "opened": onset, "last_seen": last_seen, "resolved": pd.NaT,
            "entity_type": "run", "entity_id": run, "run_id": run, "hosts": ["node-0"], "gpus": gpus, "owner": "platform",
            "playbook": "1. look", "evidence": "{}", "correlation_id": correlation, "default_tier": tier,
            "tier_reason": f"{tier}: catalogue", "findings": 1, "episode": 1, "ranks": [], "members": [run],
            "gpu_hours_at_risk": round(len(gpus) * (last_seen - onset).total_seconds() / 3600, 3)}


@pytest.fixture
def hang_twice(tmp_path) -> Path:
    """A warehouse with one hang told by two correlated incidents on the same 2 GPUs (35 and 33 minutes),
    and an unrelated SEV2 on another GPU (30 minutes)."""
    rows = pd.DataFrame([
        _incident("inc-a", "busy_not_progressing", T0, T0 + pd.Timedelta(minutes=35), ["node-0:0", "node-0:1"], "cor-a"),
        _incident("inc-b", "rank_dropout", T0 + pd.Timedelta(minutes=1), T0 + pd.Timedelta(minutes=34),
                  ["node-0:0", "node-0:1"], "cor-a"),
        _incident("inc-c", "gpu_throttle", T0, T0 + pd.Timedelta(minutes=30), ["node-1:3"], "cor-c", tier="SEV2", run="other"),
    ])
    with WarehouseResource(path=str(tmp_path / "warehouse.duckdb")).connect() as con:
        con.register("rows", rows)
        con.execute("INSERT INTO incidents BY NAME SELECT * FROM rows")
    return tmp_path


def test_totals_count_one_hang_once(hang_twice):
    hang = 2 * 35 / 60          # the hang's 2 GPUs for 35 minutes: 1.167 GPU-h, however many incidents tell it
    other = 1 * 30 / 60
    with WarehouseResource(path=str(hang_twice / "warehouse.duckdb")).connect(read_only=True) as con:
        groups = con.execute("SELECT group_id, incidents, gpu_hours_at_risk, gpu_hours_at_risk_summed FROM open_incident_groups "
                             "ORDER BY group_id").fetchall()
        listed = con.execute("SELECT incident_id, group_gpu_hours_at_risk FROM open_incidents ORDER BY incident_id").fetchall()
        open_ = con.execute("SELECT * FROM open_incidents").df()
    assert [(g, n) for g, n, _, _ in groups] == [("cor-a", 2), ("cor-c", 1)]
    assert groups[0][2] == pytest.approx(hang) and groups[0][3] == pytest.approx(hang + 2 * 33 / 60, abs=1e-3)
    assert groups[1][2] == pytest.approx(other)
    assert dict(listed)["inc-a"] == pytest.approx(hang) and dict(listed)["inc-b"] == pytest.approx(hang)
    # the incidents check says the same, and fails ERROR while the SEV1 is open
    result = verdict(open_, hang + other, BoardResource(url="http://board.test"))
    assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    assert result.metadata["gpu_hours_at_risk_open (GPU-h, each correlated group once)"].value == pytest.approx(hang + other, abs=1e-3)
    assert "[SEV1] busy_not_progressing on run llm-x on 2 GPU(s)" in result.description
    # and the board's headline
    with LiveBoard(hang_twice) as board:
        page = text_of(board.get("/").text)
    assert f"{hang + other:.2f} GPU-h GPU-hours at risk, each correlated group counted once (2 groups)" in page
    assert "1 of 2 correlated incidents" in page


def test_the_incidents_check_fails_error_while_a_sev1_is_open_and_passes_after_it_resolves(tmp_path):
    warehouse = WarehouseResource(path=str(tmp_path / "warehouse.duckdb"))
    resources = {"warehouse": warehouse, "board": BoardResource(url="http://board.test")}
    _store(warehouse, pd.DataFrame([_hang(0, 6, 30)]), evaluated("busy_not_progressing", 30))
    with memory_instance() as instance:
        result = dg.materialize([incidents, no_open_sev1_sev2], resources=resources, instance=instance)
        (check,) = result.get_asset_check_evaluations()
        assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
        assert check.description.startswith("1 SEV1 and 0 SEV2 open: [SEV1] busy_not_progressing on run llm-small on 2 GPU(s)")
        table = check.metadata["open_incident_table"].value
        assert "](http://board.test/incidents/inc-" in table and "GPU-hours at risk (GPU-h)" in table
        # the hang ends: clean evaluated windows after its last finding resolve it, and the check passes
        _store(warehouse, pd.DataFrame([_hang(0, 6, 30)]), evaluated("busy_not_progressing", 90))
        result = dg.materialize([incidents, no_open_sev1_sev2], resources=resources, instance=instance)
        (check,) = result.get_asset_check_evaluations()
        assert check.passed and check.description == "No open SEV1 or SEV2 incident."
        # the asset's own total of GPU-hours at risk counts open groups once (none open now)
        materialized = result.asset_materializations_for_node("incidents")[0]
        assert materialized.metadata["gpu_hours_at_risk_open"].value == 0.0


def test_the_incidents_asset_depends_on_every_checked_asset():
    import checks.signals  # noqa: F401
    from checks.registry import REGISTRY

    deps = {key.path[-1] for key in incidents.asset_deps[incidents.key]}
    assert {s.asset for s in REGISTRY} <= deps and {"training_steps", "gpu_samples", "lineage_events"} <= deps


# ------------------------------------------------------------------------------------- monitor incidents


def test_a_staleness_alert_is_listed_as_an_open_incident_and_leaves_when_fresh(tmp_path, monkeypatch):
    home = tmp_path
    WarehouseResource(path=str(home / "warehouse.duckdb")).connect().__enter__().close()   # an empty, migrated warehouse
    now = [pd.Timestamp("2026-11-30T03:00:00Z").timestamp()]
    monkeypatch.setattr(sensors, "utcnow", lambda: now[0])
    resources = resources_for(home)

    def tick(instance, cursor):
        with dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor) as context:
            sensors.goodput_staleness(context)
            return context.cursor

    with memory_instance() as instance:
        cursor = tick(instance, None)                   # starts watching: nothing seen yet, not stale
        now[0] += 20 * 60                               # 20 minutes without a detect run or raw data
        cursor = tick(instance, cursor)
        with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
            open_ = con.execute("SELECT incident_id, signal, family, tier, status, owner, title FROM open_incidents "
                                "ORDER BY signal").fetchall()
        # no raw data waits, so detection is not behind (docs/alerting.md): raw data itself is stale
        assert [(s, f, t, st, o) for _, s, f, t, st, o, _ in open_] == [
            ("goodput_stale_raw", "monitor", "SEV2", "open", "platform")]
        stale_id = open_[0][0]
        with LiveBoard(home) as board:
            front = text_of(board.get("/").text)
            assert "Goodput is stale: no raw data has arrived for 20 min" in front and "(Goodput itself)" in front
            assert "1 open incidents (1 about Goodput itself)" in front
            page = text_of(board.get(f"/incidents/{stale_id}").text)
            assert "Goodput is stale" in page and "status open" in page
            assert "opened" in page and "stale_after_seconds" in page and "900 s" in page
        # raw data arrives and a detect run succeeds: the next tick resolves both
        raw = home / "raw" / "gpu_samples" / "2026-11-30" / "03"
        raw.mkdir(parents=True)
        (raw / "node-0.jsonl").write_text("{}\n")

        @dg.op
        def ok():
            return 1

        @dg.job(name="detect")
        def detect():
            ok()

        assert detect.execute_in_process(instance=instance).success
        now[0] = instance.get_run_records(dg.RunsFilter(job_name="detect"), limit=1)[0].end_time + 60
        import os

        os.utime(raw / "node-0.jsonl", (now[0], now[0]))
        tick(instance, cursor)
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM open_incidents").fetchone()[0] == 0
        assert con.execute("SELECT status, resolved IS NOT NULL FROM monitor_incidents WHERE incident_id = $i",
                           {"i": stale_id}).fetchone() == ("resolved", True)


# ------------------------------------------------------------------------------------- alert links, busy


@pytest.fixture(scope="module")
def small_processed(tmp_path_factory, small_folded) -> Path:
    """The small scenario (one 20-minute hang) through ingest, every check and the fold (the session's
    small_folded, copied); alerts delivered to the file sink by the real alert sensor."""
    home = copy_home(small_folded, tmp_path_factory.mktemp("board") / "home")
    with memory_instance() as instance, dg.build_sensor_context(instance=instance, resources=resources_for(home)) as context:
        sensors.incident_alerts(context)
    return home


def _urls(value) -> list[str]:
    if isinstance(value, dict):
        return [u for v in value.values() for u in _urls(v)]
    if isinstance(value, list):
        return [u for v in value for u in _urls(v)]
    return re.findall(r"https?://[^\s\"'<>|)]+", value) if isinstance(value, str) else []


def test_every_board_link_in_an_alert_payload_answers_200(small_processed, monkeypatch):
    alerts = [json.loads(line) for line in (small_processed / "alerts" / "alerts.jsonl").read_text().splitlines()]
    assert alerts and all(a["board_url"].startswith("http://127.0.0.1:3001/incidents/inc-") for a in alerts)
    with LiveBoard(small_processed) as board:
        checked = 0
        for alert in alerts:
            links = [u for u in _urls(alert) if u.startswith("http://127.0.0.1:3001")]
            assert alert["board_url"] in links and alert["board_run_url"] in links
            for link in links:
                response = board.get(link.replace("http://127.0.0.1:3001", board.url))
                assert response.status_code == 200, (link, response.status_code)
                checked += 1
            assert not [u for u in _urls(alert) if u.startswith("file:")]   # no server paths
        page = text_of(board.get(alerts[0]["board_url"].replace("http://127.0.0.1:3001", board.url)).text)
    assert checked >= 2 * len(alerts)
    for expected in ("Run busy but not progressing: run llm-small", "2026-11-30 00:49:58 UTC", "node-0:0, node-0:1",
                     "restart from checkpoint", "step 1,000", "What to do (playbook)", "Transitions", "Deliveries", "file"):
        assert expected in page, expected


def test_every_page_answers_and_the_run_page_has_its_charts(small_processed):
    with LiveBoard(small_processed) as board:
        for path in ("/", "/cluster", "/runs/llm-small", "/static/plotly.min.js"):
            assert board.get(path).status_code == 200, path
        run = board.get("/runs/llm-small").text
        assert run.count('class="chart"') >= 6   # loss/step/grad, ranks, 4 GPU heatmaps
        assert "GPU utilization per GPU and minute (%)" in run and "<script src=\"/static/plotly.min.js\">" in run
        assert board.get("/runs/no-such-run").status_code == 404
        assert board.get("/incidents/inc-nope").status_code == 404


def test_a_held_lock_answers_warehouse_busy_not_a_500(small_processed):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(small_processed / "warehouse.duckdb")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with LiveBoard(small_processed) as board:
            response = board.get("/")
        assert response.status_code == 503 and response.headers["retry-after"] == "5"
        assert "Warehouse busy, retry" in response.text
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait()
    with WarehouseResource(path=str(small_processed / "warehouse.duckdb")).connect() as con:
        con.execute("DELETE FROM quarantine WHERE source = 'held'")


def test_a_drift_report_is_served_with_a_header_naming_what_it_compares(tmp_path):
    relative = "reports/drift/chat-api/chat-v2/2026-11-30T05.html"
    (tmp_path / relative).parent.mkdir(parents=True)
    (tmp_path / relative).write_text("<html><head><title>evidently</title></head><body><div>drift table</div></body></html>")
    with WarehouseResource(path=str(tmp_path / "warehouse.duckdb")).connect() as con:
        for column, drifted in (("prompt_tokens", True), ("confidence", False)):
            con.execute("INSERT INTO drift_scores (endpoint, model_version, hour, kind, column_name, column_type, method, score, "
                        "threshold, drifted, current_rows, reference_rows, reference_start, reference_end, reference_source, "
                        "report_path) VALUES ('chat-api', 'chat-v2', TIMESTAMP '2026-11-30 05:00', 'input', $c, 'num', 'wasserstein', "
                        "0.3, 0.1, $d, 360, 720, TIMESTAMP '2026-11-30 04:20', TIMESTAMP '2026-11-30 05:20', 'first_stable', $p)",
                        {"c": column, "d": drifted, "p": relative})
    with LiveBoard(tmp_path) as board:
        response = board.get("/" + relative)
        missing = board.get("/reports/drift/chat-api/chat-v2/2026-11-30T06.html")
        outside = board.get("/reports/drift/..%2F..%2Fwarehouse.duckdb")
    assert response.status_code == 200
    header = text_of(response.text.split('id="goodput-report-header"', 1)[1].split("</div>", 1)[0])
    for expected in ("endpoint chat-api", "model version chat-v2", "hour 2026-11-30 05:00:00 UTC",
                     "reference window 2026-11-30 04:20:00 UTC to 2026-11-30 05:20:00 UTC", "1 of 2 columns drifted"):
        assert expected in header, (expected, header)
    assert "drift table" in response.text
    assert missing.status_code == 404 and outside.status_code == 404

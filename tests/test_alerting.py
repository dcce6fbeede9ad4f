"""Alert routing and delivery against real HTTP servers on loopback (Slack incoming webhook,
PagerDuty Events API v2, a generic webhook), exactly-once delivery through failures, the attempt log,
monitoring the monitor (run failures, staleness), and the playbook catalogue walked for every signal."""

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

import checks
from assets.incidents import incidents
from checks.registry import OWNERS, REGISTRY, TIERS, playbooks
from orchestration.alerting.config import AlertingConfigError, load_config
from orchestration.alerting.payloads import pagerduty_event, slack_message
from orchestration.sensors import alerts as sensors
from orchestration.sensors.alerts import goodput_run_failures, goodput_staleness, incident_alerts
from tests.alerting_harness import REPO, SECRET_KEY, SINK_PATHS, TWO_EPISODES, clock, fold_hangs, home, loopback, resources, table, tick  # noqa: F401  (fixtures)
from tests.helpers import _store, evaluated, memory_instance


def test_payloads_match_slack_pagerduty_and_webhook_formats(home, loopback, clock):
    with memory_instance() as instance:
        fold_hangs(home, instance, TWO_EPISODES, 179)
        result = tick(home, instance)
        fold_run = instance.get_latest_materialization_event(dg.AssetKey("incidents")).run_id
    assert "delivered 16" in result.skip_message            # 4 transitions x 4 sinks
    transitions = table(home, "SELECT incident_id, transition FROM incident_transitions ORDER BY transition_at, incident_id, seq")
    expected = list(zip(transitions["incident_id"], transitions["transition"]))
    assert [t for _, t in expected] == ["opened", "resolved", "opened", "resolved"]

    # Slack incoming webhook: text fallback + Block Kit blocks within Slack's limits
    slack = loopback.accepted("/slack")
    assert len(slack) == 4
    for message in slack:
        blocks = message["blocks"]
        assert message["text"].startswith("[SEV1] ")
        assert blocks[0]["type"] == "header" and blocks[0]["text"]["type"] == "plain_text" and len(blocks[0]["text"]["text"]) <= 150
        texts = [b["text"]["text"] for b in blocks if b["type"] == "section"]
        assert all(len(t) <= 3000 for t in texts) and len(blocks[1]["fields"]) <= 10
        assert any(t.startswith("*Evidence*") and "value" in t for t in texts)
        assert any(t.startswith("*Lineage*") and "run: llm-small" in t and "node-0:1" in t for t in texts)
        assert any(t.startswith("*Playbook*") and "1. " in t and "llm-small" in t for t in texts)
        (button,) = next(b for b in blocks if b["type"] == "actions")["elements"]
        assert button["type"] == "button" and button["url"] == f"http://dagster.test:3000/runs/{fold_run}"
    # PagerDuty Events API v2: trigger then resolve with the same dedup_key (= incident id)
    events = loopback.accepted("/pagerduty")
    assert [(e["event_action"], e["dedup_key"]) for e in events] == [
        ("trigger" if t == "opened" else "resolve", iid) for iid, t in expected]
    for event in events:
        assert event["routing_key"] == SECRET_KEY
        if event["event_action"] == "trigger":
            payload = event["payload"]
            assert payload["severity"] == "critical" and payload["source"] == "llm-small"
            assert 0 < len(payload["summary"]) <= 1024 and datetime.fromisoformat(payload["timestamp"])
            assert payload["custom_details"]["playbook"].startswith("1. ") and event["links"][0]["href"].endswith(fold_run)
        else:
            assert set(event) == {"routing_key", "event_action", "dedup_key"}
    # generic webhook: a versioned envelope, the dedup key as Idempotency-Key
    hooks = [r for r in loopback.requests if r["path"] == "/hook"]
    assert [(h["body"]["alert"]["incident_id"], h["body"]["alert"]["transition"]) for h in hooks] == expected
    assert all(h["headers"]["Idempotency-Key"] == h["body"]["dedup_key"] for h in hooks)
    assert {h["body"]["type"] for h in hooks} == {"goodput.incident.opened", "goodput.incident.resolved"}
    # the file sink has them too, and every attempt is in DuckDB; no secret is in either
    assert len((home / "alerts" / "alerts.jsonl").read_text().splitlines()) == 4
    attempts = table(home, "SELECT * FROM alert_attempts")
    assert len(attempts) == 16 and set(attempts["outcome"]) == {"delivered"}
    for text in ((home / "alerts" / "attempts.jsonl").read_text(), (home / "alerts" / "alerts.jsonl").read_text(),
                 attempts.to_csv(), result.skip_message):
        assert SECRET_KEY not in text and "secret" not in text


def test_a_server_failing_the_first_requests_still_gets_exactly_one_delivery_per_transition(home, loopback, clock):
    loopback.fail_left = {SINK_PATHS["slack"]: 4, SINK_PATHS["pagerduty"]: 5, "/hook": 2}
    with memory_instance() as instance:
        fold_hangs(home, instance, TWO_EPISODES, 179)
        ticks = 0
        while len(table(home, "SELECT * FROM alert_attempts WHERE outcome = 'delivered'")) < 16:
            tick(home, instance)
            clock.advance(300)          # the sensor's next tick, past the backoff
            ticks += 1
            assert ticks < 10
        tick(home, instance)            # and once more: nothing is sent again
    keys = table(home, "SELECT incident_id || ':' || transition AS k FROM incident_transitions ORDER BY transition_at, incident_id, seq")
    for prefix in ("/slack", "/pagerduty", "/hook"):
        assert len(loopback.accepted(prefix)) == 4
    assert [(e["dedup_key"], e["event_action"]) for e in loopback.accepted("/pagerduty")] == [
        (k.split(":")[0], "trigger" if k.endswith("opened") else "resolve") for k in keys["k"]]
    counts = table(home, "SELECT sink, outcome, count(*) AS n FROM alert_attempts GROUP BY ALL ORDER BY ALL")
    assert dict(zip(counts["sink"] + "/" + counts["outcome"], counts["n"])) == {
        "file/delivered": 4, "pagerduty/delivered": 4, "pagerduty/failed": 5, "slack/delivered": 4, "slack/failed": 4,
        "webhook/delivered": 4, "webhook/failed": 2}
    assert ticks == 2


def test_a_sink_down_for_an_hour_gets_everything_afterwards_in_order_without_duplicates(home, loopback, clock):
    loopback.fail_left = {"/hook": 10**6}
    with memory_instance() as instance:
        fold_hangs(home, instance, TWO_EPISODES[:2], 75)          # the first hang, still open
        for minute in range(0, 60, 5):
            if minute == 30:                                       # meanwhile it resolves and a second one comes and goes
                fold_hangs(home, instance, TWO_EPISODES, 179)
            tick(home, instance)
            clock.advance(300)
        down_attempts = len([r for r in loopback.requests if r["path"] == "/hook"])
        loopback.fail_left = {}
        clock.advance(600)                                         # past the longest backoff
        tick(home, instance)
        tick(home, instance)
    hooks = [(b["alert"]["incident_id"], b["alert"]["transition"]) for b in loopback.accepted("/hook")]
    keys = table(home, "SELECT incident_id, transition FROM incident_transitions ORDER BY transition_at, incident_id, seq")
    assert hooks == list(zip(keys["incident_id"], keys["transition"])) and len(hooks) == 4
    # the others were not held up by it, and the backoff kept the down sink from being hammered
    assert len(loopback.accepted("/slack")) == 4 and len(loopback.accepted("/pagerduty")) == 4
    # backoff 30 s doubling to 600 s: of the 12 five-minute ticks in the hour, 8 tried the sink (3 attempts each)
    assert down_attempts == 8 * 3
    failed = table(home, "SELECT count(*) AS n FROM alert_attempts WHERE sink = 'webhook' AND outcome = 'failed'")
    assert failed.loc[0, "n"] == down_attempts


def test_a_rejected_alert_is_logged_and_does_not_block_the_rest(home, loopback, clock):
    loopback.fail_left, loopback.status_for_failure = {"/hook": 1}, 400
    with memory_instance() as instance:
        fold_hangs(home, instance, TWO_EPISODES, 179)
        tick(home, instance)
    assert len(loopback.accepted("/hook")) == 3 and len([r for r in loopback.requests if r["path"] == "/hook"]) == 4
    rejected = table(home, "SELECT * FROM alert_attempts WHERE outcome = 'rejected'")
    assert len(rejected) == 1 and rejected.loc[0, "status_code"] == 400 and rejected.loc[0, "sink"] == "webhook"


def test_routing_by_tier_and_owner_and_inactive_sinks(monkeypatch):
    config = load_config(REPO / "orchestration" / "alerting.yaml")
    sev1 = {"tier": "SEV1", "owner": "platform", "signal": "busy_not_progressing", "transition": "opened"}
    assert config.route(sev1) == ["file", "webhook", "pagerduty", "slack"]
    assert config.route({**sev1, "tier": "SEV2", "owner": "model"}) == ["file", "webhook", "slack-model"]
    assert config.route({**sev1, "tier": "SEV3", "owner": "model"}) == ["file", "webhook"]
    assert config.route({**sev1, "tier": "SEV2", "signal": "goodput_stale_raw"}) == ["file", "webhook", "slack"]


def test_pagerduty_severity_follows_the_tier():
    alert = {"incident_id": "inc-1", "transition": "escalated", "title": "t", "tier": "SEV2", "transition_at": "2026-11-30T00:00:00"}
    assert [pagerduty_event({**alert, "tier": t}, "k")["payload"]["severity"] for t in ("SEV1", "SEV2", "SEV3", "NOTICE")] == [
        "critical", "error", "warning", "info"]
    assert pagerduty_event(alert, "k")["event_action"] == "trigger"       # an escalation re-triggers the same dedup_key
    long = slack_message({**alert, "title": "x" * 500, "playbook": "y" * 5000, "evidence": {"v": 1}})
    assert len(long["blocks"][0]["text"]["text"]) == 150 and all(
        len(b["text"]["text"]) <= 3000 for b in long["blocks"] if b["type"] == "section")


def test_a_bad_routing_file_is_one_line(tmp_path):
    bad = tmp_path / "alerting.yaml"
    bad.write_text(yaml.safe_dump({"sinks": {"file": {"type": "file"}}, "routes": [{"sinks": ["file", "teams"]}]}))
    with pytest.raises(AlertingConfigError, match="unknown sink.*teams.*known: file"):
        load_config(bad)
    bad.write_text(yaml.safe_dump({"sinks": {"s": {"type": "slack"}}, "routes": []}))
    with pytest.raises(AlertingConfigError, match="needs url_env"):
        load_config(bad)


def _all_signals():
    for module in pkgutil.iter_modules(checks.__path__):
        if module.name.startswith("signals"):
            importlib.import_module(f"checks.{module.name}")
    return list(REGISTRY)


def test_every_registered_signal_has_a_playbook_an_owner_and_a_tier():
    signals = _all_signals()
    assert signals
    catalogue = playbooks()
    missing = [s.name for s in signals if s.name not in catalogue]
    assert not missing, f"signals without a playbook in checks/playbooks/: {missing}"
    for s in signals:
        assert s.tier in TIERS and s.owner in OWNERS, s.name
        book = s.playbook
        assert len(book.steps) >= 2 and all(step.strip() for step in book.steps), s.name
        assert book.responder.strip() and book.escalation, s.name
        assert "Responder:" in book.render({}) and "1. " in book.render({})


def test_run_failure_alert_fires_when_a_run_fails(home, loopback, clock):
    @dg.op
    def ingest_hour():
        raise RuntimeError("disk full writing warehouse.duckdb")

    @dg.job(name="detect")
    def failing_detect():
        ingest_hour()

    with memory_instance() as instance:
        result = failing_detect.execute_in_process(instance=instance, raise_on_error=False)
        assert not result.success
        run = instance.get_run_by_id(result.run_id)
        failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
        context = dg.build_run_status_sensor_context(
            sensor_name="goodput_run_failures", dagster_instance=instance, dagster_run=run, dagster_event=failure,
            resources=resources(home)).for_run_failure()
        goodput_run_failures(context)
        goodput_run_failures(context)          # the same failure seen twice is still one alert
    (hook,) = loopback.accepted("/hook")
    alert = hook["alert"]
    assert alert["signal"] == "goodput_run_failed" and alert["tier"] == "SEV2" and alert["family"] == "monitor"
    assert "detect" in alert["title"] and "disk full" in json.dumps(alert["evidence"])
    assert alert["dagster_run_url"] == f"http://dagster.test:3000/runs/{result.run_id}"
    (event,) = loopback.accepted("/pagerduty")
    assert event["payload"]["severity"] == "error" and event["dedup_key"] == f"run-failed-{result.run_id}"
    assert len(loopback.accepted("/slack")) == 1


def test_staleness_fires_when_ticks_stop_and_resolves_when_they_resume(home, loopback, clock):
    raw = home / "raw" / "gpu_samples" / "2026-11-30" / "03"
    raw.mkdir(parents=True)
    sample = raw / "node-0.jsonl"
    sample.write_text("{}\n")

    @dg.op
    def ok():
        return 1

    @dg.job(name="detect")
    def detect():
        ok()

    def staleness_tick(instance, cursor):
        with dg.build_sensor_context(instance=instance, resources={**resources(home), "raw_zone": _raw(home)},
                                     cursor=cursor) as context:
            result = goodput_staleness(context)
            return context.cursor, result

    with memory_instance() as instance:
        assert detect.execute_in_process(instance=instance).success
        end = instance.get_run_records(dg.RunsFilter(job_name="detect"), limit=1)[0].end_time
        clock.now = end + 60
        os.utime(sample, (clock.now, clock.now))
        cursor, _ = staleness_tick(instance, None)
        assert loopback.accepted("/hook") == []                    # fresh: ticks and raw data within 15 minutes
        clock.advance(20 * 60)                                      # ticks stop, and no raw data arrives
        cursor, result = staleness_tick(instance, cursor)
        assert "detect stale" in result.skip_message and "raw stale" in result.skip_message
        clock.advance(300)
        cursor, _ = staleness_tick(instance, cursor)                # still stale: no second alert
        opened = [b["alert"] for b in loopback.accepted("/hook")]
        assert sorted(a["signal"] for a in opened) == ["goodput_stale_detect", "goodput_stale_raw"]
        assert all(a["transition"] == "opened" and "stale" in a["title"] for a in opened)
        assert detect.execute_in_process(instance=instance).success      # ticks resume
        clock.now = instance.get_run_records(dg.RunsFilter(job_name="detect"), limit=1)[0].end_time + 30
        os.utime(sample, (clock.now, clock.now))
        cursor, result = staleness_tick(instance, cursor)
        assert "detect fresh again" in result.skip_message
    alerts = [b["alert"] for b in loopback.accepted("/hook")]
    assert [a["transition"] for a in alerts] == ["opened", "opened", "resolved", "resolved"]
    assert {a["incident_id"] for a in alerts[:2]} == {a["incident_id"] for a in alerts[2:]}
    assert [e["event_action"] for e in loopback.accepted("/pagerduty")] == ["trigger", "trigger", "resolve", "resolve"]


def _raw(home):
    from orchestration.storage.raw_zone import RawZoneResource

    return RawZoneResource(root=str(home / "raw"))


def test_incidents_command_lists_and_shows_with_playbook_and_lineage(home, clock):
    with memory_instance() as instance:
        fold_hangs(home, instance, TWO_EPISODES, 179)
        tick(home, instance)
    env = {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}
    goodput = [str(Path(sys.executable).with_name("goodput")), "incidents"]    # as users run it
    listed = subprocess.run([*goodput, "--home", str(home)], cwd=REPO, env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    ids = table(home, "SELECT incident_id FROM incidents ORDER BY onset")["incident_id"].tolist()
    assert all(i in listed.stdout for i in ids) and "SEV1" in listed.stdout and "resolved" in listed.stdout
    shown = subprocess.run([*goodput, "show", ids[1], "--home", str(home)], cwd=REPO, env=env, capture_output=True,
                           text=True)
    assert shown.returncode == 0, shown.stderr
    for expected in ("Playbook", "1. Confirm the stall", "Lineage", "node-0:1", "llm-small", "episode 2", ids[0],
                     "Transitions", "delivered"):
        assert expected in shown.stdout, expected
    missing = subprocess.run([*goodput, "show", "inc-nope", "--home", str(home)], cwd=REPO, env=env, capture_output=True,
                             text=True)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1 and "inc-nope" in missing.stderr


class LockHolder:
    """Another process holding the warehouse's write lock, as a Goodput run does."""

    def __init__(self, path):
        code = "import duckdb, sys; con = duckdb.connect(sys.argv[1]); print('locked', flush=True); sys.stdin.read()"
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def test_a_held_write_lock_is_try_later_and_never_a_duplicate(home, loopback, clock, monkeypatch):
    with memory_instance() as instance:
        fold_hangs(home, instance, TWO_EPISODES, 179)
        holder = LockHolder(home / "warehouse.duckdb")
        try:
            result = tick(home, instance)                       # a run is writing: skip the tick, no crash
        finally:
            holder.release()
        assert "locked" in result.skip_message and loopback.requests == []

        real_mirror, holders = sensors.mirror_attempts, []

        def lock_taken_after_delivery(warehouse, alerting):     # a run starts between delivery and the log's mirror
            holders.append(LockHolder(home / "warehouse.duckdb"))
            return real_mirror(warehouse, alerting)

        monkeypatch.setattr(sensors, "mirror_attempts", lock_taken_after_delivery)
        try:
            with dg.build_sensor_context(instance=instance, resources=resources(home)) as context:
                result = incident_alerts(context)
                cursor = context.cursor
        finally:
            for h in holders:
                h.release()
        monkeypatch.setattr(sensors, "mirror_attempts", real_mirror)
        assert "delivered 16" in result.skip_message and "mirrored later" in result.skip_message
        assert table(home, "SELECT count(*) AS n FROM alert_attempts").loc[0, "n"] == 0
        # the journal already says delivered: the next tick sends nothing again, and logs the attempts
        with dg.build_sensor_context(instance=instance, resources=resources(home), cursor=cursor) as context:
            result = incident_alerts(context)
        assert result.skip_message.startswith("no new incident transitions") and "16 attempt(s) logged" in result.skip_message
    assert len(loopback.requests) == 12 and len(loopback.accepted("/pagerduty")) == 4
    assert table(home, "SELECT count(*) AS n FROM alert_attempts").loc[0, "n"] == 16


def test_a_held_delivery_lock_skips_the_turn_after_the_wait_and_its_release_lets_delivery_run(home, monkeypatch):
    """One deliverer at a time: another holding `.deliver.lock` past the wait is None (skip this tick),
    not an error; once released, delivery runs."""
    import fcntl
    import time

    from orchestration.alerting import resource

    monkeypatch.setattr(resource, "DELIVER_LOCK_SECONDS", 0.3)
    alerting = resources(home)["alerting"]
    lock = Path(alerting.journal_path).with_name(".deliver.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        began = time.monotonic()
        assert alerting.deliver([]) is None
        assert time.monotonic() - began >= 0.3     # it waited for the lock before skipping (no upper bound: a busy host)
        fcntl.flock(other, fcntl.LOCK_UN)
    assert alerting.deliver([])["delivered"] == 0


def test_an_escalation_by_cost_pages_again_on_the_same_dedup_key(home, loopback, clock):
    """64 straggling ranks (SEV2) for an hour: one run incident, escalated to SEV1 when 32 GPU-hours
    are at risk (30 min on 64 GPUs); PagerDuty hears trigger (error), trigger (critical), resolve."""
    from tests.helpers import finding

    found = [finding("straggler_rank", "rank", f"llm/rank-{r}", 0, 5 + 25 * k, 30 + 30 * k, run_id="llm", rank=r,
                     hosts=[f"node-{r // 8}"], gpus=[f"node-{r // 8}:{r % 8}"]) for r in range(64) for k in (0, 1)]
    warehouse = resources(home)["warehouse"]
    _store(warehouse, pd.DataFrame(found), evaluated("straggler_rank", 179))
    with memory_instance() as instance:
        assert dg.materialize([incidents], resources={"warehouse": warehouse}, instance=instance).success
        tick(home, instance)
    (inc,) = table(home, "SELECT * FROM incidents").to_dict("records")
    assert (inc["entity_type"], inc["entity_id"], len(inc["ranks"]), inc["tier"], inc["default_tier"]) == ("run", "llm", 64, "SEV1", "SEV2")
    assert "reached 32" in inc["tier_reason"] and inc["escalated_at"] == pd.Timestamp("2026-11-30 00:30")
    events = loopback.accepted("/pagerduty")
    assert [(e["event_action"], e.get("payload", {}).get("severity")) for e in events] == [
        ("trigger", "error"), ("trigger", "critical"), ("resolve", None)]
    assert {e["dedup_key"] for e in events} == {inc["incident_id"]}
    slack = loopback.accepted("/slack")
    assert [m["text"].split("]")[0] for m in slack] == ["[SEV2", "[SEV1", "[SEV1"]
    assert "escalated from SEV2" in json.dumps(slack[1]["blocks"])


def test_the_definitions_hold_the_alerting_sensors(tmp_path):
    from orchestration.definitions import build_definitions

    defs = build_definitions(tmp_path)
    # one sensor does the alert, run-failure and staleness work (orchestration/sensors/service.py)
    assert [s.name for s in defs.sensors] == ["goodput_service"]

"""The delivery journal: an append-only JSON-lines log of every attempt to reach a sink
(`GOODPUT_HOME/alerts/attempts.jsonl`), the source of truth for what was delivered.

Appends are one fsynced write under an exclusive lock, and start on a new line when the file does
not end with one (a writer killed mid-line), so a torn line never swallows the next record; a
reader that still meets a torn fragment glued to a whole record (a file written by something else)
recovers the record. A line that is not an attempt (valid JSON without `outcome`, say) is skipped.
The journal is mirrored into the warehouse table `alert_attempts` when a write connection is free.
"""

import fcntl
import json
import math
import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

import pandas as pd

from orchestration.alerting.config import Retry
from orchestration.alerting.payloads import TRANSITION_ORDER
from orchestration.storage import sql
from orchestration.storage.sql import transaction

# Outcomes: final ones end the attempts at a (sink, dedup key); `sending` is written before a request
# to a sink that cannot take a repeat, so a crash between sending and journaling still counts as sent.
FINAL = ("delivered", "rejected", "unconfirmed", "superseded", "suppressed")   # suppressed: `goodput backfill --no-alerts`
MEMBER_FIELDS = ["attempt_id", "incident_id", "seq", "transition", "lead_incident_id", "group_size"]
ATTEMPT_FIELDS = ("attempt_id", "sink", "dedup_key", "incident_id", "transition", "attempted_at", "outcome")


def journal_path(home) -> Path:
    return Path(home) / "alerts" / "attempts.jsonl"


def append_jsonl(path: Path, records: Iterable[Mapping]) -> None:
    """Append records as JSON lines in one fsynced write, under an exclusive lock, starting on a new
    line if the file's last line was left without its newline."""
    payload = "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records).encode()
    if not payload:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            size = handle.seek(0, os.SEEK_END)
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    payload = b"\n" + payload
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _recover(line: str) -> dict | None:
    """A whole record glued after a torn fragment (`{"sink": "sl{"attempt_id": ...}`): the first
    suffix starting at `{"` that is a JSON object. A suffix starting inside the fragment cannot
    parse, since the whole record that closes the line balances only its own braces."""
    start = line.find('{"', 1)
    while start != -1:
        try:
            record = json.loads(line[start:])
            if isinstance(record, dict):
                return record
        except ValueError:
            pass
        start = line.find('{"', start + 1)
    return None


def read_jsonl(path: Path, required: tuple[str, ...] = ()) -> list[dict]:
    """The JSON objects of a JSON-lines file that carry the `required` keys; torn lines are dropped
    (that attempt's outcome is unknown) and a record glued after one is kept."""
    if not path.exists():
        return []
    with open(path, "rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            text = handle.read().decode("utf-8", errors="replace")
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = _recover(line)
        if isinstance(record, dict) and all(record.get(k) is not None for k in required):
            out.append(record)
    return out


class AlertJournal:
    """The append-only log of delivery attempts."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def record(self, attempt: Mapping) -> None:
        append_jsonl(self.path, [attempt])

    def attempts(self) -> list[dict]:
        """Every record, in order (an attempt to an at-most-once sink has a `sending` record first)."""
        return read_jsonl(self.path, ATTEMPT_FIELDS)

    def frame(self) -> pd.DataFrame:
        """One row per attempt, its last outcome (a `sending` that was never followed is left out:
        the attempt may still be under way; `finished` counts it as sent)."""
        columns = ["attempt_id", "sink", "dedup_key", "incident_id", "transition", "attempt", "attempted_at",
                   "outcome", "status_code", "error", "elapsed_seconds"]
        last = {a["attempt_id"]: a for a in self.attempts()}
        frame = pd.DataFrame([a for a in last.values() if a["outcome"] != "sending"], columns=columns)
        frame["attempted_at"] = pd.to_datetime(frame["attempted_at"], utc=True, format="ISO8601").dt.tz_localize(None)
        return frame


    def members_frame(self) -> pd.DataFrame:
        """One row per (attempt of a grouped notification, member transition it carried), from each
        attempt's last outcome (`sending` left out, as in `frame`)."""
        last = {a["attempt_id"]: a for a in self.attempts()}
        rows = [{"attempt_id": a["attempt_id"], "incident_id": c["incident_id"], "seq": c.get("seq"),
                 "transition": c["transition"], "lead_incident_id": a.get("lead_incident_id"), "group_size": a.get("group_size")}
                for a in last.values() if a["outcome"] != "sending" for c in a.get("carried") or []
                if isinstance(c, dict) and c.get("incident_id") and c.get("transition")]
        frame = pd.DataFrame(rows, columns=MEMBER_FIELDS)
        return frame.astype({"seq": "Int64", "group_size": "Int64"})


def carried(attempt: Mapping, incident_id: str, transition: str, seq: int | None) -> bool:
    """Whether this attempt told its sink about the incident's transition: a grouped notification
    listing it as carried (matched by seq when both know it), or the incident's own alert."""
    members = attempt.get("carried")
    if members is None:   # an ungrouped alert (or a journal line written before grouping recorded members)
        return attempt["dedup_key"] == f"{incident_id}:{transition}"
    return any(m.get("incident_id") == incident_id and m.get("transition") == transition
               and (seq is None or m.get("seq") is None or int(m["seq"]) == int(seq)) for m in members)


def finished(attempts: Iterable[Mapping]) -> set[tuple[str, str]]:
    """(sink, dedup key) pairs that need no more attempts: delivered, rejected as permanently bad,
    sent without an answer to a sink that cannot take a repeat (unconfirmed, or a `sending` that a
    crash left without its outcome), or superseded by a later transition of the same incident."""
    last: dict[str, Mapping] = {}
    for a in attempts:
        last[a["attempt_id"]] = a
    return {(a["sink"], a["dedup_key"]) for a in last.values() if a["outcome"] in FINAL or a["outcome"] == "sending"}


def latest_sent(attempts: Iterable[Mapping]) -> dict[tuple[str, str], int]:
    """(sink, incident) -> the order of the latest transition the sink has (or may have) received."""
    last: dict[str, Mapping] = {}
    for a in attempts:
        last[a["attempt_id"]] = a
    latest: dict[tuple[str, str], int] = {}
    for a in last.values():
        if a["outcome"] in ("delivered", "unconfirmed", "sending"):
            key = (a["sink"], a["incident_id"])
            latest[key] = max(latest.get(key, -1), TRANSITION_ORDER.get(a["transition"], -1))
    return latest


def backoff_until(attempts: list[Mapping], sink: str, retry: Retry) -> float:
    """Epoch seconds before which a sink that kept failing is left alone (0 when it is healthy)."""
    failures, last = 0, None
    for a in attempts:
        if a["sink"] != sink or a["outcome"] == "sending":
            continue
        if a["outcome"] == "failed":
            failures += 1
            last = a["attempted_at"]
        else:
            failures = 0
    if not failures or retry.tick_backoff_seconds <= 0:
        return 0.0
    ticks = math.ceil(failures / max(retry.attempts_per_tick, 1))
    wait = min(retry.tick_backoff_seconds * 2 ** min(ticks - 1, 30), retry.max_tick_backoff_seconds)   # a sink down for days
    return datetime.fromisoformat(last).timestamp() + wait


def mirror_journal(con, journal: AlertJournal) -> int:
    """Insert the journal's attempts the warehouse lacks (inside a write connection); returns rows added."""
    frame = journal.frame()
    if frame.empty:
        return 0
    before = con.execute("SELECT count(*) FROM alert_attempts").fetchone()[0]
    with transaction(con, new_attempts=frame, new_members=journal.members_frame()):
        sql.run(con, "alerts/store_attempts")
        sql.run(con, "alerts/store_attempt_members")   # which member transitions grouped notifications carried
    return con.execute("SELECT count(*) FROM alert_attempts").fetchone()[0] - before


"""Playbooks that do not mislead (issue 17 item 8g): every registered signal's playbook, rendered by
the incidents fold for an incident with no lineage at all (no run, host, GPU, endpoint, version or
checkpoint, evidence with nulls), says "unknown" and leaves no "None" and no unfilled placeholder."""

import json
import re

import pandas as pd

import checks.signals  # noqa: F401
from assets.incidents import fold
from checks.registry import REGISTRY, Playbook
from tests.helpers import LIFECYCLE_T0 as T0

NONE_OR_BRACE = re.compile(r"\bNone\b|\bnan\b|\{|\}")


def _bare_finding(signal) -> dict:
    return {"signal": signal.name, "entity_type": signal.entity, "entity_id": f"{signal.entity}-x",
            "partition_start": T0, "onset": T0, "detected_at": T0 + pd.Timedelta(minutes=5),
            "last_seen": T0 + pd.Timedelta(minutes=10), "run_id": None, "rank": None, "hosts": [], "gpus": [],
            "value": 1.0, "baseline": None, "threshold": 0.5,
            "evidence": json.dumps({"host": None, "gpu": None, "endpoint": None, "window": None}),
            "endpoint": None, "model_version": None, "checkpoint": None, "triage_class": None}


def test_every_playbook_rendered_with_missing_lineage_says_unknown_and_leaves_nothing_unfilled():
    findings = pd.DataFrame([_bare_finding(s) for s in REGISTRY])
    incidents, _ = fold(findings, pd.DataFrame(columns=["signal", "partition_start", "evaluated_until"]))
    assert len(incidents) == len(REGISTRY)
    for inc in incidents.itertuples():
        assert not NONE_OR_BRACE.findall(inc.playbook), (inc.signal, inc.playbook)
    assert any("unknown" in p for p in incidents["playbook"])


def test_the_escalation_and_responder_are_filled_too_and_known_facts_are_kept():
    book = Playbook(("Check {host} GPU {gpu} at {value:.1f}.",), "owner of {endpoint}", ("lead of {endpoint}",))
    text = book.render({"host": None, "value": "n/a"})            # a format spec a fact cannot take: kept plain
    assert text.splitlines() == ["1. Check unknown GPU unknown at n/a.", "Responder: owner of unknown",
                                 "Escalation: lead of unknown"]
    known = book.render({"host": "node-3", "gpu": 5, "value": 2.345, "endpoint": "chat"})
    assert known.splitlines()[0] == "1. Check node-3 GPU 5 at 2.3." and "lead of chat" in known

"""The signal registry: one source of truth, every signal with a playbook, clear errors."""

import pandas as pd
import pytest

import checks.signals  # noqa: F401
from checks.asset_checks import signal_checks
from checks.registry import REGISTRY, Signal, SignalRegistry, playbooks


def test_every_signal_has_a_playbook_with_steps_and_escalation():
    missing = [s.name for s in REGISTRY if s.name not in playbooks()]
    assert not missing, f"signals without a playbook in checks/playbooks/*.yaml: {missing}"
    for signal in REGISTRY:
        assert len(signal.playbook.steps) >= 2 and signal.playbook.escalation


def test_no_playbook_without_a_signal():
    known = {s.name for s in REGISTRY}
    assert set(playbooks()) <= known, f"playbooks for unknown signals: {set(playbooks()) - known}"


def test_one_check_per_signal():
    names = sorted(key.name for c in signal_checks for key in c.check_keys)
    assert names == sorted(s.name for s in REGISTRY)


def test_duplicate_name_raises_and_unknown_name_lists_known():
    registry = SignalRegistry()
    signal = REGISTRY.get("busy_not_progressing")
    registry.register(signal)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(signal)
    with pytest.raises(KeyError, match="known signals: busy_not_progressing"):
        registry.get("no_such_signal")


def test_bad_tier_is_refused():
    with pytest.raises(ValueError, match="tier 'SEV9'"):
        Signal(name="x", family="training", entity="run", tier="SEV9", owner="model", title="x",
               description="x", asset="training_steps", inputs=(), query="q", detector=lambda f, t: pd.DataFrame())


def test_playbook_renders_evidence_and_says_unknown_for_what_it_lacks():
    text = REGISTRY.get("busy_not_progressing").playbook.render({"run_id": "run-a", "stall_minutes": 12.5})
    assert "run run-a" in text and "12.5 min" in text
    assert "unknown" in text and "{" not in text and "None" not in text   # a missing fact reads "unknown"
    assert text.splitlines()[0].startswith("1. ") and "Escalation:" in text


def test_readme_signal_table_is_generated_from_the_registry():
    from pathlib import Path

    from checks.registry import signal_table

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("<!-- signals:start -->\n", 1)[1].split("\n<!-- signals:end -->", 1)[0]
    assert block == signal_table(), "README's signal table is stale: paste `goodput signals` between the markers"

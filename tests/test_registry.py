"""The signal registry: one source of truth, every signal with a playbook, clear errors."""

import dataclasses

import pandas as pd
import pytest
import yaml

import checks.signals  # noqa: F401
from checks.asset_checks import signal_checks
from checks.registry import PLAYBOOKS_DIR, REGISTRY, Signal, SignalRegistry, playbooks
from sources.config_file import ConfigError


def test_every_signal_has_a_playbook_with_steps_and_escalation():
    missing = [s.name for s in REGISTRY if s.name not in playbooks()]
    assert not missing, f"signals without a playbook in checks/playbooks/*.yaml: {missing}"
    for signal in REGISTRY:
        assert len(signal.playbook.steps) >= 2 and signal.playbook.escalation


def test_no_playbook_without_a_signal():
    known = {s.name for s in REGISTRY}
    assert set(playbooks()) <= known, f"playbooks for unknown signals: {set(playbooks()) - known}"


def test_a_signal_without_a_playbook_entry_is_one_line_naming_the_file_the_signal_and_the_fix():
    """Not a KeyError when an incident first renders it: check_playbooks (run as checks.signals is
    imported) and the signal's own playbook both say which file, which signal, what to add."""
    registry = SignalRegistry()
    lonely = registry.register(dataclasses.replace(REGISTRY.get("busy_not_progressing"), name="no_playbook_yet"))
    for attempt in (registry.check_playbooks, lambda: lonely.playbook):
        with pytest.raises(ConfigError) as info:
            attempt()
        message = str(info.value)
        assert "\n" not in message and not isinstance(info.value, KeyError), message
        assert message.startswith(f"{PLAYBOOKS_DIR / 'training.yaml'}: no_playbook_yet: registered signal has no playbook: "), message
        assert "add `no_playbook_yet: {responder, steps, escalation}`" in message, message
    REGISTRY.check_playbooks()      # the real catalogue: complete both ways


def test_a_playbook_entry_for_no_registered_signal_is_one_line_naming_its_file(tmp_path):
    registry = SignalRegistry()
    registry.register(REGISTRY.get("busy_not_progressing"))
    entry = {"responder": "on-call", "steps": ["a", "b"], "escalation": ["lead"]}
    good, stray = tmp_path / "good", tmp_path / "stray"     # two folders: the catalogue is read once per folder
    for folder in (good, stray):
        folder.mkdir()
        (folder / "training.yaml").write_text(yaml.safe_dump({"busy_not_progressing": entry}))
    (stray / "gpu.yaml").write_text(yaml.safe_dump({"busy_not_progresing": entry}))
    with pytest.raises(ConfigError) as info:
        registry.check_playbooks(stray)
    assert str(info.value) == (f"{stray / 'gpu.yaml'}: busy_not_progresing: a playbook for no registered signal: "
                               "rename it to the signal's name or remove it (signals: busy_not_progressing)")
    registry.check_playbooks(good)


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

"""The one registry of signals.

A signal is what Goodput can say about a run, rank, GPU, checkpoint, endpoint or model version:
its family, the entity it speaks of, a severity tier by cost of delay, the owning team, a
playbook, the SQL that builds its time series and one small pure detector over that frame.
Asset checks, docs and scoring are all built from here; nothing else lists signals.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Annotated

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from sources.config_file import ConfigError, config_error, from_validation, read_yaml

FAMILIES = ("training", "distributed", "gpu", "checkpoint", "serving", "quality")
ENTITIES = ("run", "rank", "gpu", "checkpoint", "endpoint", "model_version")
TIERS = ("SEV1", "SEV2", "SEV3")
OWNERS = ("model", "platform", "product")
# Which side of its threshold a finding's value lies on: a rate, a ratio or a duration flagged "above",
# a utilization, a power draw or an improvement flagged "below", a size flagged "outside" a band
# around its baseline (too small or too large).
DIRECTIONS = ("above", "below", "outside")

# A detector takes the signal's time-series frame and its thresholds, returns findings rows.
Detector = Callable[[pd.DataFrame, Mapping[str, float]], pd.DataFrame]

FINDING_COLUMNS = (
    "entity_id", "onset", "detected_at", "last_seen", "run_id", "rank", "hosts", "gpus",
    "value", "baseline", "threshold", "evidence",
)
# Lineage a detector may add to its findings (null when it does not): the checkpoint a checkpoint
# audit speaks of, the endpoint and model version of a serving or quality finding, and its triage
# class when the detector can tell (otherwise the incidents fold classifies serving and quality).
LINEAGE_COLUMNS = ("endpoint", "model_version", "checkpoint", "triage_class")

PLAYBOOKS_DIR = Path(__file__).with_name("playbooks")   # one YAML file per family, one entry per signal


UNKNOWN = "unknown"


@dataclass(frozen=True)
class Playbook:
    """Ordered diagnostic steps (may use `{evidence}` placeholders), who responds, where it escalates."""

    steps: tuple[str, ...]
    responder: str
    escalation: tuple[str, ...]

    def render(self, facts: Mapping[str, object]) -> str:
        """The playbook as text, every placeholder filled from `facts` (steps, responder and
        escalation alike); a fact that is missing, None, NaN or empty reads "unknown", never
        "None" or a bare "{placeholder}" a responder would have to guess."""
        fill = _Facts(facts)
        lines = [f"{i}. {fill(step)}" for i, step in enumerate(self.steps, 1)]
        lines.append(f"Responder: {fill(self.responder)}")
        lines.append("Escalation: " + " -> ".join(fill(e) for e in self.escalation))
        return "\n".join(lines)


def _missing(value: object) -> bool:
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "nan", "NaT")):
        return True
    if isinstance(value, list | tuple | set | dict):
        return len(value) == 0
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


class _Facts(string.Formatter):
    """str.format over facts: an unknown or missing fact is "unknown"; a format spec a fact cannot
    take ("{value:.1f}" of "unknown") falls back to the plain value."""

    def __init__(self, facts: Mapping[str, object]):
        super().__init__()
        self.facts = facts

    def __call__(self, text: str) -> str:
        try:
            return self.vformat(text, (), {})
        except (ValueError, IndexError):    # a stray brace in a step: leave the text as written
            return text

    def get_value(self, key, args, kwargs):
        value = self.facts.get(key) if isinstance(key, str) else None
        return UNKNOWN if _missing(value) else value

    def get_field(self, field_name, args, kwargs):
        try:
            return super().get_field(field_name, args, kwargs)
        except (AttributeError, KeyError, IndexError, TypeError):
            return UNKNOWN, field_name

    def format_field(self, value, format_spec):
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


@dataclass(frozen=True)
class Signal:
    name: str
    family: str
    entity: str
    tier: str
    owner: str
    title: str
    description: str
    asset: str                      # the asset whose check this is
    inputs: tuple[str, ...]         # other assets the detector reads
    query: str                      # sql/<query>.sql builds the detector's frame (with a `tick` column)
    detector: Detector
    thresholds: Mapping[str, float] = field(default_factory=dict)
    fault_types: tuple[str, ...] = ()   # simulator fault types this signal is meant to catch
    entity_column: str = "run_id"       # the frame column naming the entities evaluated
    query_params: Mapping[str, str] = field(default_factory=dict)  # fixed $params of the query (one SQL, several signals)
    # What the frame's rows of one entity at one tick (and all rows of that tick) show when its fault
    # is over (checks/clearings.py): {"why": a sentence in the signal's terms, facts...}; None says
    # only that it was no longer flagged.
    clearing: Callable[[pd.DataFrame, pd.DataFrame], dict] | None = None
    direction: str = "above"            # DIRECTIONS: which side of `threshold` a finding's `value` is flagged on
    # A GPU signal whose judgement of one GPU reads only that GPU's host's rows (no peers, no run): with
    # shards configured it runs per hour x shard on each shard's GPUs (checks/sharded.py), else per hour.
    host_local: bool = False
    # A per-minute series signal judged by a causal detector (a minute's verdict reads its lookback, and an
    # episode goes on from `open_episodes`): a live run judges it from the first minute whose inputs changed
    # and joins that to the partition's stored results (checks/windowed.py), not the hour so far. A change
    # to rows more than three hours before its window does not reach it (sql/baselines/mark_dirty.sql).
    live_window: bool = False

    def __post_init__(self):
        for value, allowed, what in (
            (self.family, FAMILIES, "family"), (self.entity, ENTITIES, "entity"),
            (self.tier, TIERS, "tier"), (self.owner, OWNERS, "owner"), (self.direction, DIRECTIONS, "direction"),
        ):
            if value not in allowed:
                raise ValueError(f"signal {self.name!r}: {what} {value!r} is not one of {', '.join(allowed)}")
        if self.host_local and self.entity != "gpu":
            raise ValueError(f"signal {self.name!r}: host_local needs entity 'gpu' (its entity id names the host)")
        object.__setattr__(self, "thresholds", MappingProxyType(dict(self.thresholds)))
        object.__setattr__(self, "query_params", MappingProxyType(dict(self.query_params)))

    @property
    def playbook(self) -> Playbook:
        try:
            return playbooks()[self.name]
        except KeyError:
            raise no_playbook(self) from None

    def worst(self, findings: pd.DataFrame) -> pd.Series:
        """The finding furthest past its threshold on the signal's side: the highest value of a
        signal flagged above, the lowest of one flagged below, the furthest from its baseline (by
        ratio) of one flagged outside a band."""
        value = findings["value"].astype(float)
        if self.direction == "below":
            return findings.loc[value.idxmin()]
        if self.direction == "outside":
            baseline = pd.to_numeric(findings["baseline"], errors="coerce").where(lambda b: b > 0).fillna(1.0)
            return findings.loc[np.log(value.where(value > 0) / baseline).abs().fillna(np.inf).idxmax()]
        return findings.loc[value.idxmax()]


class SignalRegistry:
    """Signals by name. Registering a name twice raises; an unknown name lists the known ones."""

    def __init__(self) -> None:
        self._signals: dict[str, Signal] = {}

    def register(self, signal: Signal) -> Signal:
        if signal.name in self._signals:
            raise ValueError(f"signal {signal.name!r} is already registered")
        self._signals[signal.name] = signal
        return signal

    def get(self, name: str) -> Signal:
        try:
            return self._signals[name]
        except KeyError:
            raise KeyError(f"unknown signal {name!r}; known signals: {', '.join(sorted(self._signals))}") from None

    def __iter__(self) -> Iterator[Signal]:
        return iter(sorted(self._signals.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._signals)

    def for_fault(self, fault_type: str) -> list[Signal]:
        return [s for s in self if fault_type in s.fault_types]

    def check_playbooks(self, folder: Path = PLAYBOOKS_DIR) -> None:
        """Every registered signal has its playbook entry and every entry names a registered signal;
        else a ConfigError `file: signal: problem and the fix` (at import of checks.signals, not when
        an incident first needs the playbook)."""
        catalogue = playbooks(folder)
        for signal in self:
            if signal.name not in catalogue:
                raise no_playbook(signal, folder)
        for name in sorted(set(catalogue) - set(self._signals)):
            path = next((p for p in sorted(folder.glob("*.yaml")) if name in (read_yaml(p) or {})), folder)
            raise config_error(path, name, "a playbook for no registered signal: rename it to the signal's name or "
                                           f"remove it (signals: {', '.join(sorted(self._signals))})")


class PlaybookEntry(BaseModel):
    """One entry of a `checks/playbooks/*.yaml` file, as validated at load."""

    model_config = ConfigDict(extra="forbid")
    responder: Annotated[str, Field(min_length=1)]
    steps: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    escalation: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


_PLAYBOOK_FILE = TypeAdapter(dict[str, PlaybookEntry])


@functools.cache
def playbooks(folder: Path = PLAYBOOKS_DIR) -> Mapping[str, Playbook]:
    """The playbook catalogue (`checks/playbooks/*.yaml`), by signal name; a name twice, or an entry
    without its steps, responder or escalation, is a ConfigError `file: signal.key: problem`."""
    catalogue: dict[str, Playbook] = {}
    for path in sorted(folder.glob("*.yaml")):
        data = read_yaml(path) or {}
        if not isinstance(data, dict):
            raise config_error(path, "", "expected `signal_name: {responder, steps, escalation}` entries")
        try:
            entries = _PLAYBOOK_FILE.validate_python(data)
        except ValidationError as error:
            raise from_validation(path, error) from None
        for name, entry in entries.items():
            if name in catalogue:
                raise config_error(path, name, "playbook defined twice in checks/playbooks/")
            catalogue[name] = Playbook(tuple(entry.steps), entry.responder, tuple(entry.escalation))
    return MappingProxyType(catalogue)


def no_playbook(signal: Signal, folder: Path = PLAYBOOKS_DIR) -> ConfigError:
    """The one line for a registered signal without a playbook entry: which file, which signal, the fix."""
    return config_error(folder / f"{signal.family}.yaml", signal.name,
                        f"registered signal has no playbook: add `{signal.name}: {{responder, steps, escalation}}` "
                        f"to this file (or another of {folder}/*.yaml)")


REGISTRY = SignalRegistry()


def signal_table(registry: SignalRegistry = REGISTRY) -> str:
    """The README's signal table, generated from the registry (a test keeps the README in step)."""
    lines = [
        "| signal | family | entity | tier | owner | what it means |",
        "|---|---|---|---|---|---|",
    ]
    for s in registry:
        lines.append(f"| `{s.name}` | {s.family} | {s.entity} | {s.tier} | {s.owner} | {s.description} |")
    return "\n".join(lines)

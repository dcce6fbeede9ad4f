"""Per-site threshold overrides: `GOODPUT_HOME/thresholds.yaml`, merged over each signal's defaults.

    busy_not_progressing:
      min_stall_seconds: 600     # our jobs run 8-minute evaluations with busy GPUs

A name that is not a signal, or a key the signal does not have, is an error that says which.

One reserved section, `serving_slos:`, holds per-endpoint service-level objectives (keys in
SLO_KEYS) that the serving signals compare against instead of their default thresholds:

    serving_slos:
      chat-api: {ttft_p99_seconds: 1.0, itl_p99_seconds: 0.08, max_num_seqs: 256}

The file is read and validated once per version (pydantic; cached by path, size and mtime), and every
problem is one line, `thresholds.yaml: key: problem` (sources.config_file): a YAML syntax error, a
binary file, an unknown signal, a value that is not a finite number.
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import dagster as dg
from pydantic import BaseModel, ConfigDict, Field, Strict, TypeAdapter, ValidationError

from sources.config_file import ConfigError, config_error, from_validation, read_yaml

SERVING_SLOS = "serving_slos"
SLO_KEYS = ("ttft_p50_seconds", "ttft_p95_seconds", "ttft_p99_seconds", "itl_p50_seconds", "itl_p95_seconds",
            "itl_p99_seconds", "max_num_seqs", "error_ratio")

Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]   # an int or float; never a bool, a string, NaN
_THRESHOLDS = TypeAdapter(dict[str, Number])


class ServingObjectives(BaseModel):
    """One endpoint's SLOs (all optional, non-negative)."""

    model_config = ConfigDict(extra="forbid")
    ttft_p50_seconds: Annotated[Number, Field(ge=0)] | None = None
    ttft_p95_seconds: Annotated[Number, Field(ge=0)] | None = None
    ttft_p99_seconds: Annotated[Number, Field(ge=0)] | None = None
    itl_p50_seconds: Annotated[Number, Field(ge=0)] | None = None
    itl_p95_seconds: Annotated[Number, Field(ge=0)] | None = None
    itl_p99_seconds: Annotated[Number, Field(ge=0)] | None = None
    max_num_seqs: Annotated[Number, Field(gt=0)] | None = None
    error_ratio: Annotated[Number, Field(ge=0, le=1)] | None = None


@dataclass(frozen=True)
class Thresholds:
    overrides: Mapping[str, Mapping[str, float]]
    serving_slos: Mapping[str, Mapping[str, float]]


def _mapping(path, key: str, value, expected: str) -> dict:
    if not isinstance(value, dict):
        raise config_error(path, key, f"expected {expected}, got {type(value).__name__}")
    return value


def _slos(path: Path, section) -> dict[str, dict[str, float]]:
    slos = {}
    for endpoint, objectives in _mapping(path, SERVING_SLOS, section or {}, "`endpoint: {slo_key: value}`").items():
        where = f"{SERVING_SLOS}.{endpoint}"
        objectives = _mapping(path, where, objectives, f"`{{slo_key: value}}`; keys: {', '.join(SLO_KEYS)}")
        unknown = sorted(set(map(str, objectives)) - set(SLO_KEYS))
        if unknown:
            raise config_error(path, where, f"has no SLO key(s) {', '.join(unknown)}; known: {', '.join(SLO_KEYS)}")
        try:
            model = ServingObjectives.model_validate(objectives)
        except ValidationError as error:
            raise from_validation(path, error, f"{where}.") from None
        slos[str(endpoint)] = {k: float(v) for k, v in model.model_dump(exclude_none=True).items()}
    return slos


def load_thresholds(path: str | Path, catalogue: Mapping[str, Mapping[str, float]] | None = None) -> Thresholds:
    """The file validated (against `catalogue`, signal name -> its default thresholds, when given)."""
    p = Path(path)
    data = read_yaml(p, missing_ok=True)
    data = _mapping(p, "", data or {}, "`signal_name: {threshold: value}` mappings (and an optional serving_slos: section)")
    overrides: dict[str, dict[str, float]] = {}
    slos: dict[str, dict[str, float]] = {}
    for name, section in data.items():
        name = str(name)
        if name == SERVING_SLOS:
            slos = _slos(p, section)
            continue
        if catalogue is not None and name not in catalogue:
            raise config_error(p, name, f"unknown signal; known: {', '.join(sorted(catalogue))}")
        section = _mapping(p, name, section or {}, "`{threshold: value}`")
        if catalogue is not None:
            unknown = sorted(set(map(str, section)) - set(catalogue[name]))
            if unknown:
                raise config_error(p, name, f"has no threshold(s) {', '.join(unknown)}; known: {', '.join(sorted(catalogue[name]))}")
        try:
            overrides[name] = {k: float(v) for k, v in _THRESHOLDS.validate_python(section).items()}
        except ValidationError as error:
            raise from_validation(p, error, f"{name}.") from None
    return Thresholds(overrides, slos)


@functools.lru_cache(maxsize=16)
def _cached(path: str, version: tuple, catalogue: tuple | None) -> Thresholds:
    return load_thresholds(path, {name: dict.fromkeys(keys) for name, keys in catalogue} if catalogue is not None else None)


class ThresholdsResource(dg.ConfigurableResource):
    """Threshold overrides from a YAML file (absent file: every signal keeps its defaults)."""

    path: str

    def load(self, catalogue: Mapping[str, Mapping[str, float]] | None = None) -> Thresholds:
        """The validated file, parsed once per version of it; raises ConfigError (one line)."""
        p = Path(self.path)
        try:
            st = p.stat()
            version = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            version = None
        key = tuple(sorted((n, tuple(sorted(d))) for n, d in catalogue.items())) if catalogue is not None else None
        return _cached(str(p), version, key)

    def overrides(self) -> dict[str, dict[str, float]]:
        return {k: dict(v) for k, v in self.load().overrides.items()}

    def serving_slos(self) -> dict[str, dict[str, float]]:
        """Per-endpoint SLOs from the `serving_slos:` section ({} without one); bad keys or values raise."""
        return {k: dict(v) for k, v in self.load().serving_slos.items()}

    def for_signal(self, name: str, defaults: Mapping[str, float],
                   catalogue: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, float]:
        """The signal's thresholds: its defaults with the file's overrides on top. With `catalogue`
        (every signal's defaults) the whole file is checked, so an unknown signal name fails too."""
        try:
            own = self.load(catalogue).overrides.get(name, {})
        except ConfigError as error:
            raise dg.Failure(str(error), allow_retries=False) from None
        unknown = sorted(set(own) - set(defaults))
        if unknown:
            raise dg.Failure(str(config_error(self.path, name, f"has no threshold(s) {', '.join(unknown)}; "
                                              f"known: {', '.join(sorted(defaults))}")), allow_retries=False)
        return {**defaults, **own}

    def validate(self, known) -> None:
        """Check the file against `known`: signal name -> defaults (names and keys checked), or a
        collection of names (names checked); ConfigError, one line, if wrong."""
        if isinstance(known, Mapping):
            self.load(known)
            return
        unknown = sorted(set(self.load().overrides) - set(known))
        if unknown:
            raise config_error(self.path, unknown[0], f"unknown signal; known: {', '.join(sorted(known))}")

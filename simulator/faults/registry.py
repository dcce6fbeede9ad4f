"""The fault-effect registry: one frozen ``FaultEffect`` per fault type, registered by its family's
module (gpu, training, distributed, serving, quality, checkpoint, badput, shapes).

An effect says what the scenario loader needs to validate a fault (the targets it takes, its
magnitude range, whether it stalls or kills a run) and carries the hooks through which the record
builders apply it. A builder asks the registry for the effects with its hook and calls them in the
scenario's fault order, so the effects never hide behind string comparisons and the registry is
the one list of implemented faults: the loader accepts exactly the registered names.

Hooks (all optional; ``None`` means the effect does not act there):

* ``slowdown(scenario, run, f, step_time, progress) -> [Slowdown]``: seconds added to the steps
  that start inside the fault (timeline.py);
* ``gpu_state(frame, f)``: the GPU's state before the series are drawn; ``gpu(frame, f)``: its
  samples; ``run_gpu(frame, f, rank)``: the samples of each GPU the targeted run holds;
  ``gpu_temperature(frame, f)``: its temperature after the thermal model (gpu_samples.py);
* ``telemetry(scenario, f, host, t) -> (gpu index or None, dropped mask)``: samples never written;
  ``host_clock(scenario, f, t) -> seconds``: how far the host's clock is off at ``t``;
* ``memory_growth(scenario, f, t) -> bytes``: what the caching allocator reserves on top;
* ``series(frame, f)``: per-step values every rank shares; ``rank_steps(frame, f, rank)``: one
  rank's step records (steps.py);
* ``checkpoint(folder, shard, ext, f)``: the files of a saved checkpoint (checkpoint_files.py);
* ``serving(frame, f, k)``, ``serving_requests(frame, f)``, ``quality(frame, f, k)``: an endpoint's
  metrics, request counters and prediction log (serving.py);
* ``kills(scenario, f) -> (run, rank) | None``: the run and rank the fault kills;
* ``truth_end(scenario, f) -> datetime`` and ``rank_effect(scenario, f)``: its ground truth;
* ``validate(scenario, f, fail)``: placement checks beyond the target's form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["FaultEffect", "Slowdown", "effect", "effects_with", "register", "registered"]


@dataclass
class Slowdown:
    """Seconds added to steps that start inside [start, end) (progress time)."""

    kind: str  # "data" (all ranks), "collective" (all ranks) or "compute" (one rank)
    start: float
    end: float
    seconds: float
    rank: int = -1


@dataclass(frozen=True)
class FaultEffect:
    """A fault type: what the loader validates and where the simulator applies it.

    ``stalls_run``: the fault stops a run's progress for its duration, so the run's end shifts
    later by that much. ``needs_fp16``: the target run must use fp16 (dynamic loss scaling);
    ``needs_holder``: a run's rank must hold the target GPU at onset; ``holds_spare_gpu``: the GPU
    is allocated to a run that does not use it (badput ``idle``); ``skips_saves``: the run's saves
    inside the fault write nothing; ``weights_only``: the targeted save writes no optimizer state.
    """

    name: str
    family: str
    target_kinds: tuple[str, ...]
    description: str
    stalls_run: bool = False
    max_magnitude: float | None = None
    needs_fp16: bool = False
    needs_holder: bool = False
    holds_spare_gpu: bool = False
    skips_saves: bool = False
    weights_only: bool = False
    whole_job: bool = False  # kills every rank at once: the job ends at the onset
    end_status: str | None = None  # run_ended's status when it ends the run (default "failed")
    logs_end: bool = True  # False: the job dies without its launcher writing run_ended (SIGKILL, node crash)
    kills: Callable | None = None
    slowdown: Callable | None = None
    gpu_state: Callable | None = None
    gpu: Callable | None = None
    gpu_temperature: Callable | None = None
    run_gpu: Callable | None = None
    telemetry: Callable | None = None
    host_clock: Callable | None = None
    memory_growth: Callable | None = None
    series: Callable | None = None
    rank_steps: Callable | None = None
    checkpoint: Callable | None = None
    serving: Callable | None = None
    serving_requests: Callable | None = None
    quality: Callable | None = None
    truth_end: Callable | None = None
    rank_effect: Callable | None = None
    validate: Callable | None = None

    @property
    def kills_run(self) -> bool:
        return self.kills is not None


_REGISTRY: dict[str, FaultEffect] = {}


def register(spec: FaultEffect) -> FaultEffect:
    """Add a fault type; a second effect with the same name is a programming error."""
    if spec.name in _REGISTRY:
        raise ValueError(f"fault type {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def registered() -> dict[str, FaultEffect]:
    """Every fault type, by name (in registration order)."""
    return _REGISTRY


def effect(name: str) -> FaultEffect:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown fault type {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def effects_with(faults, hook: str):
    """``(fault, hook function)`` for the faults whose effect has ``hook``, in the given order."""
    for f in faults:
        fn = getattr(_REGISTRY[f.type], hook)
        if fn is not None:
            yield f, fn

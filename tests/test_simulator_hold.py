"""The simulator holds a dead rank's fault for hours: a run's `nccl_timeout` decides how long its
surviving ranks spin before the job fails (default 10 minutes, as PyTorch's NCCL default)."""

from datetime import timedelta

import pytest

from simulator import ScenarioError, scenario_from_dict

LOSS = {"initial": 9.0, "floor": 2.1, "decay": 0.35, "noise": 0.02}


def _scenario(**run_extra):
    return scenario_from_dict({
        "name": "hold", "seed": 1, "start": "2026-11-30T00:00:00Z", "duration": "6h",
        "cluster": {"hosts": 1, "gpus_per_host": 2},
        "runs": [{"id": "r", "start": "5m", "duration": "5h", "hosts": [0], "step_time": "5s", "loss": LOSS, **run_extra}],
        "faults": [{"type": "rank_dropout", "target": "rank:r/rank-1", "onset": "1h", "duration": "3h"}],
    })


def test_a_dead_rank_fails_its_job_at_the_nccl_timeout_or_the_faults_end():
    default = _scenario().failure("r")
    assert default.fail - default.death == timedelta(minutes=10)
    held = _scenario(nccl_timeout="6h").failure("r")
    assert held.fail - held.death == timedelta(hours=3)        # the fault's end comes first
    assert _scenario(nccl_timeout="30m").failure("r").fail - held.death == timedelta(minutes=30)


def test_a_bad_nccl_timeout_is_a_one_line_error():
    with pytest.raises(ScenarioError, match=r"runs\[0\]\.nccl_timeout"):
        _scenario(nccl_timeout="soon")

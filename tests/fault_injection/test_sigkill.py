"""SIGKILL at random moments of a detect run: the next run completes on its own and leaves the tables of a
clean run (issue 16, "what it must show"; docs/reliability.md).

Each trial takes a fresh home (the small scenario's raw zone, a new Dagster instance), starts the real
`detect` job of one hour in a child process, and kills it with SIGKILL at a moment drawn by a seeded RNG
from the points a clean run of that hour reaches: after its N-th stored event (a step starting, an output,
a check result, a step ending: the pool slot is held across most of them), or inside its K-th warehouse
transaction, after its writes and before its COMMIT. The next run is the same job in a new process, with
nothing done by hand in between: it must free the dead run's pool slot itself, complete, and leave every
table equal to the clean run's. GOODPUT_FI_KILLS sets the number of trials (default 20), GOODPUT_FI_SEED
the seed.
"""

import os
import random
import time

from orchestration.config.home import warehouse_path
from tests.fault_injection.conftest import PARTITION, new_home
from tests.fault_injection.harness import detect, differences, fork_run, instance_of, tables

KILLS = int(os.environ.get("GOODPUT_FI_KILLS", "20"))
SEED = int(os.environ.get("GOODPUT_FI_SEED", "16"))


def moments(events: int, commits: int, n: int, seed: int) -> list[tuple[str, int]]:
    """n moments of a run that reaches `events` events and `commits` transactions: half inside writes."""
    rng = random.Random(seed)
    return [("event", rng.randint(1, events - 1)) if rng.random() < 0.5 else ("commit", rng.randint(1, commits))
            for _ in range(n)]


def test_sigkill_at_random_moments_then_the_next_run_completes_with_clean_tables(simulated, scratch, clean, record_property):
    assert clean["events"] > 50 and clean["commits"] > 10   # the moments span a real run
    outcomes = []
    started = time.monotonic()
    for i, (kind, n) in enumerate(moments(clean["events"], clean["commits"], KILLS, SEED)):
        home = new_home(simulated, scratch / f"kill-{i:02d}")
        child = fork_run(home, detect(home, PARTITION),
                         after_events=n if kind == "event" else None, before_commit=n if kind == "commit" else None)
        assert child.stopped, f"trial {i}: the run ended (exit {child.exit_code}) before its moment {kind} {n}"
        instance = instance_of(home)
        held = [s.run_id for s in instance.event_log_storage.get_concurrency_info("warehouse").claimed_slots]
        child.kill()

        rerun = fork_run(home, detect(home, PARTITION))
        assert rerun.exit_code == 0, f"trial {i}: the run after a SIGKILL at {kind} {n} failed"
        assert instance.event_log_storage.get_concurrency_info("warehouse").claimed_slots == []
        diff = differences(clean["tables"], tables(warehouse_path(home), home))
        assert not diff, f"trial {i}: SIGKILL at {kind} {n}, then a run: tables differ from a clean run: {diff}"
        outcomes.append((kind, n, bool(held)))
    kills_holding_slot = sum(held for _, _, held in outcomes)
    inside_writes = sum(kind == "commit" for kind, _, _ in outcomes)
    record_property("kills", len(outcomes))
    record_property("kills_while_holding_slot", kills_holding_slot)
    record_property("kills_inside_a_transaction", inside_writes)
    record_property("seconds", round(time.monotonic() - started, 1))
    print(f"\n{len(outcomes)} SIGKILLs (seed {SEED}): {inside_writes} inside a warehouse transaction, "
          f"{kills_holding_slot} while the run held the `warehouse` slot; every next run completed with clean tables "
          f"({time.monotonic() - started:.0f}s)")
    assert len(outcomes) == KILLS >= 20 or "GOODPUT_FI_KILLS" in os.environ

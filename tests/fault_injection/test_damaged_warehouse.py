"""Issue 16 item 6: a warehouse deleted mid-run is not silently recreated; a damaged warehouse or instance
database is one line naming the file and the way out, never a traceback."""

import shutil

import dagster as dg
import pytest

from orchestration.cli import main
from orchestration.config.home import ensure_instance, warehouse_path
from orchestration.storage.instance import InstanceDamaged, open_instance
from orchestration.storage.warehouse import WarehouseDamaged, WarehouseResource, marker_path
from tests.fault_injection.conftest import PARTITION, new_home
from tests.fault_injection.harness import fork_run, instance_of, materialize, materialize_now, step_messages
from tests.helpers import memory_instance


def test_a_warehouse_deleted_mid_run_is_not_recreated_and_the_run_fails(simulated, scratch):
    home = new_home(simulated, scratch / "deleted")
    path = warehouse_path(home)
    child = fork_run(home, materialize(home, ["gpu_samples", "gpu_baselines"], PARTITION),
                     when=lambda e: e.dagster_event is not None and e.dagster_event.event_type_value == "STEP_SUCCESS")
    assert child.stopped and path.exists() and marker_path(path).exists()   # the first step wrote it
    path.unlink()                                                           # deleted between two steps
    path.with_name(path.name + ".wal").unlink(missing_ok=True)
    assert child.resume() != 0                     # the run reports failure, not success
    assert not path.exists()                        # ...and left no empty warehouse behind
    instance = instance_of(home)
    (run,) = [r.dagster_run for r in instance.get_run_records()]
    assert run.status == dg.DagsterRunStatus.FAILURE
    (message,) = step_messages(instance, run.run_id, "STEP_FAILURE")
    assert f"{path} is gone, but this home had a warehouse there" in message and str(marker_path(path)) in message


@pytest.mark.parametrize("damage", ["garbage header", "zero bytes", "a directory"])
def test_a_damaged_warehouse_is_one_line_naming_the_file(tmp_path, damage, capsys, monkeypatch):
    monkeypatch.setenv("GOODPUT_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    path = warehouse_path(tmp_path)
    with WarehouseResource(path=str(path)).connect():
        pass
    path.unlink()
    if damage == "garbage header":
        path.write_bytes(b"GOODPUT?" * 4096)
    elif damage == "zero bytes":
        path.write_bytes(b"")
    else:
        path.mkdir()
    assert main(["sql", "--home", str(tmp_path), "SELECT 1"]) == 2           # a reader
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and ("move it aside" in err or "restore it" in err)
    with pytest.raises(WarehouseDamaged, match="move it aside"):              # a writer
        with WarehouseResource(path=str(path)).connect():
            pass


def test_a_damaged_writer_step_fails_with_the_line_not_a_traceback(simulated, scratch):
    home = new_home(simulated, scratch / "damaged-step")
    warehouse_path(home).mkdir()
    with memory_instance() as instance:
        result = materialize_now(home, ["gpu_samples"], PARTITION, instance)
        assert not result.success
        (message,) = step_messages(instance, result.run_id, "STEP_FAILURE")
    assert f"{warehouse_path(home)} is a directory, not a DuckDB warehouse: move it aside" in message


def test_a_corrupt_instance_database_is_one_line(tmp_path, monkeypatch):
    dagster_home = ensure_instance(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    with open_instance():
        pass
    runs_db = dagster_home / "history" / "runs.db"
    runs_db.write_bytes(b"this is not sqlite" * 512)
    with pytest.raises(InstanceDamaged) as caught:
        open_instance()
    assert len(str(caught.value).splitlines()) == 1 and str(dagster_home) in str(caught.value)
    shutil.rmtree(dagster_home)                     # the way out it names: a fresh instance
    ensure_instance(tmp_path)
    with open_instance():
        pass

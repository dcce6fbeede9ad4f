"""The warehouse file attaches to one DuckDB engine per process (orchestration/storage/attached.py): what a
connection to the file promised before still holds. Another process is a real second Python process."""

import os
import subprocess
import sys

import duckdb
import pytest

from orchestration.storage import attached
from orchestration.storage.warehouse import WarehouseBusy, WarehouseResource

OTHER = """import duckdb, sys
con = duckdb.connect(sys.argv[1])
con.execute("INSERT INTO notes VALUES ('from the other process')")
print(con.execute("SELECT count(*) FROM notes").fetchone()[0])
con.close()
"""


def other_process(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", OTHER, str(path)], capture_output=True, text=True)


@pytest.fixture
def warehouse(tmp_path) -> WarehouseResource:
    resource = WarehouseResource(path=str(tmp_path / "warehouse.duckdb"))
    with resource.connect() as con:
        con.execute("CREATE TABLE notes (text VARCHAR)")
    return resource


def test_connections_at_once_share_the_file_and_the_last_one_out_releases_it(warehouse):
    with warehouse.connect() as first:
        with warehouse.connect() as second:
            first.execute("INSERT INTO notes VALUES ('first')")
            assert second.execute("SELECT count(*) FROM notes").fetchone()[0] == 1   # one database, not two
        # the first still holds the file: another process is refused, as by a connection of its own
        refused = other_process(warehouse.path)
        assert refused.returncode != 0 and "lock" in refused.stderr.lower()
        first.execute("INSERT INTO notes VALUES ('still open')")
    done = other_process(warehouse.path)   # detached: checkpointed, the lock released
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3"
    assert not os.path.exists(warehouse.path + ".wal")


def test_one_file_under_two_spellings_is_one_attachment(warehouse, tmp_path):
    (tmp_path / "link").symlink_to(tmp_path)
    other = WarehouseResource(path=f"{tmp_path}/link/./warehouse.duckdb")
    with warehouse.connect() as first, other.connect() as second:   # not a second attachment of the same file
        first.execute("INSERT INTO notes VALUES ('one file')")
        assert second.execute("SELECT count(*) FROM notes").fetchone()[0] == 1


def test_a_reader_while_this_process_writes_is_refused_like_a_second_configuration(warehouse):
    with warehouse.connect() as writer:
        with pytest.raises(duckdb.ConnectionException, match="different configuration"):
            with warehouse.connect(read_only=True, wait_seconds=0):
                pass
        writer.execute("INSERT INTO notes VALUES ('the writer goes on')")
    with warehouse.connect(read_only=True, wait_seconds=0) as reader:
        assert reader.execute("SELECT count(*) FROM notes").fetchone()[0] == 1


def test_the_lock_another_process_holds_is_still_a_busy_warehouse(warehouse):
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
                               "print('holding', flush=True); sys.stdin.read()", warehouse.path],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(WarehouseBusy) as busy:
            with warehouse.connect(read_only=True, wait_seconds=0):
                pass
        assert f"PID {holder.pid}" in busy.value.holder
    finally:
        holder.communicate("")
    with warehouse.connect(read_only=True, wait_seconds=0) as reader:   # nothing of the refusal stays behind
        assert reader.execute("SELECT count(*) FROM notes").fetchone()[0] == 0


def in_forked_child(body) -> int:
    """Run `body()` in a forked child; its exit code: 0 if it returned, 1 if DuckDB refused it, 2 otherwise."""
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            body()
            code = 0
        except duckdb.Error:
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_never_writes_through_its_parent_s_attachment(warehouse):
    """A child forked while the parent holds the file (the SIGKILL suite's forked runs) is refused it; one forked
    after (Celery's prefork pool) opens it with an engine of its own."""
    def write():
        with warehouse.connect() as con:
            con.execute("INSERT INTO notes VALUES ('the child')")

    held = attached.open_file(warehouse.path)
    try:
        assert in_forked_child(write) == 1
        held.con.execute("INSERT INTO notes VALUES ('the parent goes on')")
    finally:
        held.close()
    assert in_forked_child(write) == 0
    with warehouse.connect(read_only=True, wait_seconds=0) as reader:
        assert sorted(reader.execute("SELECT text FROM notes").fetchall()) == [("the child",), ("the parent goes on",)]

"""Throwaway PostgreSQL and Redis servers on loopback: the stand-ins for separate hosts.

`goodput demo --deployment distributed`, the distributed tests and the scale benchmark start the
services a multi-host deployment runs on other machines (docs/deploy.md) as local processes in a
folder of their own: PostgreSQL from Debian's binaries (`initdb` + `pg_ctl`, trust authentication on
127.0.0.1 only) and `redis-server` with persistence off. Each waits for readiness by asking the
server (`pg_ctl -w`, a Redis PING) a bounded number of times, never by sleeping a fixed time.

PostgreSQL refuses to run as root: as root the cluster runs as the `postgres` system user (which
the Debian package creates), in a folder of its own under the system temp folder (the caller's
folder may not be reachable by that user), removed again by `stop()`.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


class ServiceUnavailable(RuntimeError):
    """A service's binaries are missing or it did not start; the message says which and what to do."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin() -> Path | None:
    """The newest Debian PostgreSQL bin folder with initdb and pg_ctl, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    return Path(found[-1]).parent if found else None


def redis_bin() -> str | None:
    return shutil.which("redis-server")


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@dataclass
class LocalPostgres:
    """A PostgreSQL cluster in `root` on 127.0.0.1:`port` with database `dbname` owned by `user`."""

    root: Path
    port: int = field(default_factory=free_port)
    user: str = "goodput"
    dbname: str = "goodput"

    cluster: Path | None = None

    @property
    def data(self) -> Path:
        return self._cluster() / "pgdata"

    @property
    def log(self) -> Path:
        return self._cluster() / "postgres.log"

    def _cluster(self) -> Path:
        if self.cluster is None:
            if os.geteuid() == 0:   # a folder the `postgres` user owns, reachable through the sticky /tmp
                self.cluster = Path(tempfile.mkdtemp(prefix="goodput-pg-"))
                owner = pwd.getpwnam("postgres")
                os.chown(self.cluster, owner.pw_uid, owner.pw_gid)
            else:
                self.cluster = self.root
        return self.cluster

    def libpq(self, dbname: str | None = None) -> str:
        """The libpq key=value string (DuckDB's postgres extension, DuckLake's catalog)."""
        return f"dbname={dbname or self.dbname} host=127.0.0.1 port={self.port} user={self.user}"

    def url(self, dbname: str | None = None) -> str:
        """The SQLAlchemy URL (dagster-postgres)."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname or self.dbname}"

    def start(self) -> LocalPostgres:
        binaries = postgres_bin()
        if binaries is None:
            raise ServiceUnavailable("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): "
                                     "sudo apt-get install postgresql, or run scripts/setup.sh")
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.data / "PG_VERSION").exists():
            self._run([str(binaries / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust",
                       "-E", "UTF8", "--no-sync"])
        options = f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' -c fsync=off -c max_connections=200"
        self._run([str(binaries / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                   "-o", options, "-w", "-t", "120", "start"])
        self.create_database(self.dbname)
        return self

    def create_database(self, dbname: str) -> None:
        binaries = postgres_bin()
        found = subprocess.run([str(binaries / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                                "-d", "postgres", "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{dbname}'"],
                               capture_output=True, text=True, check=True).stdout.strip()
        if not found:
            subprocess.run([str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, dbname],
                           capture_output=True, text=True, check=True)

    def stop(self) -> None:
        binaries = postgres_bin()
        if binaries is not None and (self.data / "postmaster.pid").exists():
            subprocess.run(_as_postgres([str(binaries / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]),
                           capture_output=True, text=True)
        if self.cluster is not None and self.cluster != self.root:
            shutil.rmtree(self.cluster, ignore_errors=True)

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(_as_postgres(command), capture_output=True, text=True, cwd="/")
        if done.returncode != 0:
            log = self.log
            tail = log.read_text()[-800:] if log.exists() else ""
            raise ServiceUnavailable(f"{' '.join(command[:1])} failed ({done.returncode}): {done.stderr.strip()[-400:]} {tail}")

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class LocalRedis:
    """A `redis-server` on 127.0.0.1:`port`, nothing persisted (the broker's queue lives as long as it)."""

    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, tries: int = 200) -> LocalRedis:
        binary = redis_bin()
        if binary is None:
            raise ServiceUnavailable("redis-server is not installed: sudo apt-get install redis-server, or run scripts/setup.sh")
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "redis.log", "wb")
        self.process = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                         "--appendonly", "no", "--dir", str(self.root)], stdout=log, stderr=subprocess.STDOUT)
        for _ in range(tries):   # bounded: each try is a connection attempt, not a timed wait
            if self.process.poll() is not None:
                break
            if self.ping():
                return self
            time.sleep(0.05)
        self.stop()
        raise ServiceUnavailable(f"redis-server did not answer PING on port {self.port}; see {self.root / 'redis.log'}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()

    def __enter__(self) -> LocalRedis:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

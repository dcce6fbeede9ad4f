"""Benchmark the checkpoint audit's hashing against `sha256sum` on the same files, and show that a
second audit of unchanged files hashes nothing (the sha256 cache in the warehouse).

    python bench/bench_hash.py                 # 8 files x 128 MiB (1 GiB)
    python bench/bench_hash.py --quick         # 3 files x 2 MiB, one round (the tests run this)

It writes a checkpoint folder of random files with a Goodput manifest, warms the page cache, then
times, best of `--rounds`: `sha256sum` over the files, and `audit_checkpoint` with an empty cache
(every file hashed, sizes and structure checked too). The ratio is sha256sum's seconds over ours
(1.0 = as fast; the aim is 0.8 or better). Then two audits through the DuckDB cache, each on a new
connection as the asset does: the first hashes every file, the second none. Prints a markdown
table with the machine it ran on; `--out` also writes it as JSON.
"""

import argparse
import json
import os
import platform
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestration.storage.warehouse import WarehouseResource  # noqa: E402
from sources import checkpoint_audit as ca  # noqa: E402
from sources.client import MANIFEST_NAME  # noqa: E402


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    coreutils = subprocess.run(["sha256sum", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return (f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}, "
            f"{ssl.OPENSSL_VERSION}, {coreutils[0] if coreutils else 'sha256sum'}")


def write_checkpoint(folder: Path, files: int, mib: int) -> int:
    folder.mkdir(parents=True)
    entries, block = [], 1 << 20
    for i in range(files):
        path = folder / f"model-{i + 1:05d}-of-{files:05d}.bin"
        with open(path, "wb") as fh:
            for _ in range(mib):
                fh.write(os.urandom(block))
        entries.append({"path": path.name, "bytes": path.stat().st_size, "sha256": ca.sha256_file(path)})
    (folder / MANIFEST_NAME).write_text(json.dumps({"run_id": "bench", "step": 1, "files": entries}))
    return sum(e["bytes"] for e in entries)


def best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--mib", type=int, default=128, help="MiB per file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", help="where to write the files (default: a temporary folder, removed after)")
    parser.add_argument("--quick", action="store_true", help="3 files x 2 MiB, one round")
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args()
    if args.quick:
        args.files, args.mib, args.rounds = 3, 2, 1
    if shutil.which("sha256sum") is None:
        print("bench_hash: sha256sum not found on PATH; install coreutils", file=sys.stderr)
        return 2

    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="goodput-bench-hash-"))
    try:
        folder = base / "checkpoint"
        if folder.exists():
            shutil.rmtree(folder)
        total = write_checkpoint(folder, args.files, args.mib)
        paths = sorted(str(p) for p in folder.glob("*.bin"))
        subprocess.run(["sha256sum", *paths], check=True, capture_output=True)   # warm the page cache for both

        def coreutils():
            subprocess.run(["sha256sum", *paths], check=True, capture_output=True)

        audits = []

        def ours():
            audits.append(ca.audit_checkpoint(folder, ca.HashCache()))

        t_ref, t_ours = best(coreutils, args.rounds), best(ours, args.rounds)
        assert all(a.ok and a.hashed == args.files for a in audits), [a.problems for a in audits]

        warehouse = WarehouseResource(path=str(base / "bench.duckdb"))
        passes = []
        for _ in range(2):
            t0 = time.perf_counter()
            with warehouse.connect() as con:
                cache = ca.DuckDBHashCache(con)
                audit = ca.audit_checkpoint(folder, cache)
                cache.save(con)
            passes.append((audit.hashed, audit.hashed_bytes, time.perf_counter() - t0, audit.ok))
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)

    mib = total / (1 << 20)
    result = {
        "machine": machine(), "files": args.files, "bytes": total, "rounds": args.rounds, "quick": args.quick,
        "sha256sum_seconds": t_ref, "audit_seconds": t_ours,
        "sha256sum_mib_per_s": mib / t_ref, "audit_mib_per_s": mib / t_ours, "ratio": t_ref / t_ours,
        "first_audit_files_hashed": passes[0][0], "second_audit_files_hashed": passes[1][0],
        "second_audit_bytes_hashed": passes[1][1], "second_audit_seconds": passes[1][2],
        "audits_ok": all(p[3] for p in passes),
    }
    print(f"## Checkpoint hashing{' (quick)' if args.quick else ''}: {args.files} files, {mib:.0f} MiB, best of {args.rounds}\n")
    print(f"Machine: {result['machine']}\n")
    print("| what | seconds | MiB/s | files hashed |")
    print("|---|---|---|---|")
    print(f"| sha256sum | {t_ref:.3f} | {mib / t_ref:.0f} | {args.files} |")
    print(f"| audit, empty cache | {t_ours:.3f} | {mib / t_ours:.0f} | {args.files} |")
    print(f"| audit via DuckDB cache, 1st | {passes[0][2]:.3f} | | {passes[0][0]} |")
    print(f"| audit via DuckDB cache, 2nd (unchanged files) | {passes[1][2]:.3f} | | {passes[1][0]} |")
    print(f"\nratio to sha256sum (its seconds / ours): {result['ratio']:.2f} (aim >= 0.8); "
          f"second audit hashed {passes[1][0]} file(s), {passes[1][1]} bytes")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

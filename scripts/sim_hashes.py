"""Hash everything the simulator writes for a set of scenarios, to show a refactor changed no byte.

    python scripts/sim_hashes.py record OUT.json [SCENARIO ...]   # default: every shipped scenario
    python scripts/sim_hashes.py compare BEFORE.json AFTER.json

``record`` simulates each scenario into a fresh temporary folder with the ``simulator`` package
found on ``PYTHONPATH`` (so the same script hashes an older checkout), hashes every file under it
(raw zone, ground truth, badput truth, checkpoint files) and the summary ``simulate`` returns,
then removes the folder. ``compare`` prints the scenarios and files whose hashes differ and exits
non-zero if any do.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def default_scenarios() -> list[Path]:
    return sorted((ROOT / "simulator" / "scenarios").glob("*.yaml")) + sorted((ROOT / "bench" / "scenarios").glob("*.yaml"))


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record(out: Path, scenarios: list[Path]) -> None:
    from simulator import load_scenario, simulate

    result = json.loads(out.read_text()) if out.exists() else {}
    for path in scenarios:
        key = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        if key in result:
            continue
        folder = Path(tempfile.mkdtemp(prefix="sim-hash-"))
        try:
            t0 = time.process_time()
            summary = simulate(load_scenario(path), folder)
            files = {p.relative_to(folder).as_posix(): _sha(p) for p in sorted(folder.rglob("*")) if p.is_file()}
            result[key] = {"summary": summary, "files": files}
            print(f"{key}: {len(files)} files, {time.process_time() - t0:.0f} CPU-s", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        out.write_text(json.dumps(result, indent=1, sort_keys=True))  # resumable after a kill


def compare(before: dict, after: dict) -> int:
    bad = 0
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            print(f"{key}: only in {'after' if a is None else 'before'}")
            bad += 1
            continue
        diff = [f for f in sorted(set(a["files"]) | set(b["files"])) if a["files"].get(f) != b["files"].get(f)]
        if a["summary"] != b["summary"]:
            diff.insert(0, "(summary)")
        status = "identical" if not diff else f"{len(diff)} differ: {', '.join(diff[:5])}"
        print(f"{key}: {len(a['files'])} files {status}")
        bad += bool(diff)
    print(f"{len(set(before) | set(after)) - bad} scenarios identical, {bad} differ")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "record":
        record(Path(argv[1]), [Path(p).resolve() for p in argv[2:]] or default_scenarios())
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(json.loads(Path(argv[1]).read_text()), json.loads(Path(argv[2]).read_text()))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

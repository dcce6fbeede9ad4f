"""What the GPU capture's three processes share (bench/gpu_capture.py): the repo on sys.path, the run id,
the step target, a timestamped log line, an atomic JSON write. Standard library only."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


RUN_ID = "h200-capture"
TARGET_STEP_SECONDS = 0.3


def say(message: str) -> None:
    print(f"[gpu_capture {datetime.now(timezone.utc).strftime('%H:%M:%S')}] {message}", flush=True)


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def parse_iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


"""Prediction logs (JSONL or Parquet) -> raw predictions; rows that carry only an outcome for an
earlier request id (no prediction) -> raw prediction_outcomes."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from sources.importers.common import ImportErrorForUser, Parsed, bounded_time, digest, finish, inputs, write_all

SUFFIXES = (".jsonl", ".json", ".parquet")


def _rows(path: Path) -> list[tuple[int, object, str | None]]:
    """(line, row, raw text if the line was not JSON) for every row of the file."""
    if path.suffix == ".parquet":
        import pandas as pd

        try:
            frame = pd.read_parquet(path)
        except Exception as error:  # noqa: BLE001 - any reader error means the same thing here
            raise ImportErrorForUser(f"{path}: not a readable Parquet file ({type(error).__name__}); "
                                     "pass the prediction log's .parquet files") from None
        return [(i, row, None) for i, row in enumerate(json.loads(frame.to_json(orient="records", date_format="iso", date_unit="ms")), 1)]
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    rows.append((number, json.loads(line), None))
                except ValueError:
                    rows.append((number, None, line.rstrip("\n")))
    return rows


def _reject(number: int, row, raw: str | None, reason: str) -> dict:
    return {"line": number, "raw": raw if raw is not None else json.dumps(row, default=str), "reason": reason}


def parse_predictions(path: Path, endpoint: str | None) -> Parsed:
    predictions, outcomes, rejects = [], [], []
    rows = _rows(path)
    for number, row, raw in rows:
        if raw is not None:
            rejects.append(_reject(number, row, raw, "not valid JSON"))
            continue
        if not isinstance(row, dict) or not row.get("time"):
            rejects.append(_reject(number, row, raw, "not a JSON object with a time"))
            continue
        try:
            row["time"] = bounded_time(datetime.fromisoformat(str(row["time"]).replace("Z", "+00:00")))
        except ValueError as error:
            rejects.append(_reject(number, row, raw, f"time {row['time']!r} is not a usable ISO-8601 time ({error})"))
            continue
        if endpoint and not row.get("endpoint"):
            row["endpoint"] = endpoint
        for key in ("prediction", "outcome"):
            if row.get(key) is not None and not isinstance(row[key], str):
                row[key] = json.dumps(row[key])
        (outcomes if "prediction" not in row and "outcome" in row else predictions).append(row)
    if rows and not predictions and not outcomes and all(raw is not None for _, _, raw in rows):
        raise ImportErrorForUser(f"{path}: not a prediction log (no line of it is JSON); pass JSONL or Parquet prediction logs")
    parsed = finish(path, predictions + outcomes, rejects)
    parsed.records, parsed.outcomes = predictions, outcomes
    return parsed


def import_predictions(paths, raw_root, endpoint: str | None = None) -> dict:
    files = inputs(paths, "*")
    chosen = [p for p in files if p.suffix in SUFFIXES]
    if not chosen:
        raise ImportErrorForUser(f"{', '.join(map(str, files[:3]))}: not a prediction log; expected {', '.join(SUFFIXES)} files")
    parsed = [(f"import-{digest(p)}", parse_predictions(p, endpoint)) for p in chosen]
    result = write_all(raw_root, "predictions", parsed)
    outcomes = [(name, Parsed(p.outcomes, [], p.report)) for name, p in parsed]
    more = write_all(raw_root, "prediction_outcomes", outcomes)
    result["files"] += more["files"]
    result["records"] += more["records"]
    return result

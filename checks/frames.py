"""Stacking the rows of frames some of which are empty or have a column with no values.

A check step stores its signals' rows together (checks/asset_checks.py), and the incremental incident
fold (assets/incidents_incremental.py) joins rows read by SQL with rows built in pandas; either side is
often empty, or a column (a clearing time, a run) all missing on one side. pandas decides the stacked
dtypes without those entries and warns that it will count them
(FutureWarning); `stack` keeps today's dtypes and values without the warning.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd


def stack(frames: Iterable[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """The rows of `frames` one after another (index renumbered); `columns` only when none has rows.
    Empty frames are left out, and a column all missing in a frame takes the dtype of the frames
    with values in it, where they agree on one that holds a missing value. Only the columns whose
    dtypes differ between the frames are looked at (the others stack as they are)."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=columns)
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    kinds: dict[str, set] = {}
    for f in frames:
        for column, dtype in f.dtypes.items():
            kinds.setdefault(column, set()).add(dtype)
    mixed = [c for c, dtypes in kinds.items() if len(dtypes) > 1]
    casts: list[dict] = [{} for _ in frames]
    for column in mixed:
        empty = [column in f and not f[column].notna().any() for f in frames]
        dtypes = {f[column].dtype for f, e in zip(frames, empty) if column in f and not e}
        if len(dtypes) != 1:
            continue
        (dtype,) = dtypes
        if isinstance(dtype, np.dtype) and dtype.kind in "iub":   # no missing value: pandas stacks those as objects, and so does this
            continue
        for cast, f, e in zip(casts, frames, empty):
            if e and f[column].dtype != dtype:
                cast[column] = dtype
    return pd.concat([_cast(f, cast) for f, cast in zip(frames, casts)], ignore_index=True)


def _cast(frame: pd.DataFrame, dtypes: dict) -> pd.DataFrame:
    """`frame` with the columns in `dtypes` cast, the others shared, not copied (astype copies every column)."""
    if not dtypes:
        return frame
    out = frame.copy(deep=False)
    for column, dtype in dtypes.items():
        out[column] = frame[column].astype(dtype)
    return out

"""A watch on every file the process opens (builtins.open, io.open, pathlib, os.open, zipfile...):
a Python audit hook sees the `open` event of each. Hooks cannot be removed, so one hook is installed
once and records only inside `watch_opens()`."""

import contextlib
import os
import sys
from pathlib import Path

_recording: list[list[Path]] = []


def _hook(event: str, args: tuple) -> None:
    if event == "open" and _recording and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        _recording[-1].append(Path(os.path.realpath(path)))


sys.addaudithook(_hook)


@contextlib.contextmanager
def watch_opens():
    """Yields the list of real paths opened while the block runs."""
    opened: list[Path] = []
    _recording.append(opened)
    try:
        yield opened
    finally:
        _recording.pop()

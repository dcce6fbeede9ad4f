"""Progress for long work on a terminal: one status line, redrawn in place, silent elsewhere.

`Ticker` keeps a status line ("[3/8] detect 2026-11-30-02:00  12s, about 20s left") on stderr while
a step runs, redrawn twice a second by a thread so that the elapsed time moves even while one step
takes long. When stderr is not a terminal (CI, pipes, files) it writes nothing: logs stay clean and
the command's own output is unchanged. `say()` prints a line to stdout without tearing the status.
"""

from __future__ import annotations

import sys
import threading
import time

CLEAR = "\r\x1b[K"  # carriage return + erase to end of line


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value < 120 else f"{value / 60:.1f} min"


class Ticker:
    """A live status line for work of `total` steps (or unknown length when `total` is None)."""

    def __init__(self, total: int | None = None, stream=None, interval: float = 0.5, enabled: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream) if enabled is None else enabled
        self.total = total
        self.interval = interval
        self.done = 0
        self.text = ""
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Ticker:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="goodput-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.enabled:
            with self._lock:
                self.stream.write(CLEAR)
                self.stream.flush()

    def update(self, text: str) -> None:
        """Set what is being done now."""
        with self._lock:
            self.text = text
        self._draw()

    def step(self, n: int = 1) -> None:
        """Count finished steps (for the share done and the time left)."""
        with self._lock:
            self.done += n

    def say(self, message: str) -> None:
        """Print a line to stdout; the status line is cleared first and redrawn after."""
        with self._lock:
            if self.enabled:
                self.stream.write(CLEAR)
                self.stream.flush()
            print(message, flush=True)
        self._draw()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        parts = [self.text, _seconds(elapsed)]
        if self.total:
            parts.insert(0, f"[{min(self.done + 1, self.total)}/{self.total}]")
            if self.done:
                left = elapsed / self.done * (self.total - self.done)
                parts.append(f"about {_seconds(left)} left")
        return "  ".join(p for p in parts if p)

    def _draw(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.stream.write(CLEAR + self.line())
            self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

"""A heartbeat for long steps of the CLI (a first run's numba compile takes 1–2 min on 2 cores)."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def heartbeat(log: Callable[[str], None], what: str, period: float = 5.0) -> Iterator[None]:
    """While the body runs, ``log`` one line every ``period`` s (``"  ... <what> (12 s)"``) from a daemon
    thread, so a step that compiles kernels never leaves the terminal silent; nothing when it is quick."""
    done = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not done.wait(period):
            log(f"  ... {what} ({time.monotonic() - t0:.0f} s)")

    thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(1.0)

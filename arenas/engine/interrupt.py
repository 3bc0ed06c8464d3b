"""Steps that can be abandoned: a stop, pause, SIGTERM or Ctrl-C takes effect mid-step.

A step that takes minutes (a self-play collection with search) would otherwise hold a
stop hostage until it ends. An arena whose `train_step` changes no
state before its end declares ``interruptible = True`` and calls
`check_interrupt` inside its long loops. When the engine asks
(`StepGate.event` set by a signal or a live command) the check raises
`StepInterrupted`; the loop then restores the RNG streams it captured when the
step began, so the checkpoint written at that boundary, and a resume from it, re-run the
abandoned step exactly.
"""

from __future__ import annotations

import threading


class StepInterrupted(Exception):
    """Raised by `check_interrupt` when the engine abandons the current
    step (a stop, pause, SIGTERM or Ctrl-C); the loop discards the step."""


class StepGate:
    """The flag a running step polls (one per `Loop`; set from any thread)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def request(self) -> None:
        """Ask the running step (if interruptible) to stop at its next check."""
        self.event.set()

    def clear(self) -> None:
        """Let steps run again (after the loop has handled the request)."""
        self.event.clear()

    def check(self) -> None:
        """Raise `StepInterrupted` when a request is pending."""
        if self.event.is_set():
            raise StepInterrupted("the step was interrupted (stop, pause or signal)")

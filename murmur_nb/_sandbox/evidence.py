"""What a module run leaves behind as evidence: how it ended, its stderr tail, its stdout head.

* **Bounded and escaped.** The tail is the last :data:`TAIL_LINES` lines of stderr within
  :data:`TAIL_BYTES`; the head is the first :data:`HEAD_BYTES` of stdout. Control characters
  other than newline and tab are written as ``\\x1b``-style escapes, so a module cannot clear
  the screen, move the cursor or hide text in the host's message, widget or log; so are the
  bidirectional embeddings, overrides and isolates (``\\u202e``), with
  which text shows in an order other than the one it is in.
* **A signal is named.** A process killed by a signal has a negative return code from
  :mod:`subprocess`; a sandbox launcher (bubblewrap) re-exits with ``128 + signal``. Both are
  said as ``SIGSEGV`` (and the status), so "it crashed" reads as such.
* **One value, one sentence.** :meth:`RunEvidence.summary` is the clause an error message
  quotes; :meth:`RunEvidence.lines` is the block a traceback, a widget or the checker shows.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from murmur_nb._rules import escape_control

__all__ = ["HEAD_BYTES", "TAIL_BYTES", "TAIL_LINES", "RunEvidence", "signal_name"]

#: the last lines of stderr kept as evidence, and their byte bound
TAIL_LINES = 20
TAIL_BYTES = 4096
#: the first bytes of a standard output that was not an envelope
HEAD_BYTES = 512

def signal_name(returncode: int | None) -> str:
    """``SIGKILL`` for a process a signal ended (``-9``, or ``137`` from a launcher); else
    ``""``."""
    if returncode is None:
        return ""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        return signal.Signals(number).name if number else ""
    except ValueError:
        return ""


def _tail(stderr: bytes) -> str:
    if not stderr:
        return ""
    text = escape_control(stderr[-TAIL_BYTES:].decode("utf-8", "replace")).rstrip()
    lines = text.splitlines()
    if len(stderr) > TAIL_BYTES and len(lines) > 1:
        lines = lines[1:]  # the first line was cut in the middle
    return "\n".join(lines[-TAIL_LINES:])


def _head(stdout: bytes) -> str:
    if not stdout:
        return ""
    text = escape_control(stdout[:HEAD_BYTES].decode("utf-8", "replace"))
    return text + (" …" if len(stdout) > HEAD_BYTES else "")


@dataclass(frozen=True, slots=True)
class RunEvidence:
    """How a module's process ended and what it left: the facts an error about it quotes.

    ``returncode`` is the exit status (``None`` when it was never reaped), ``signal`` the
    name of the signal that ended it (``""`` if none), ``stderr_tail`` its last lines of
    standard error and ``stdout_head`` the start of what it printed when that was not an
    envelope (``""`` otherwise); both bounded and with control characters escaped.
    """

    returncode: int | None
    signal: str = ""
    stderr_tail: str = ""
    stdout_head: str = ""

    @classmethod
    def of(cls, returncode: int | None, stderr: bytes, stdout: bytes = b"") -> RunEvidence:
        """The evidence of a run; pass ``stdout`` only when it was not an envelope."""
        return cls(returncode, signal_name(returncode), _tail(stderr), _head(stdout))

    def with_stdout(self, stdout: bytes) -> RunEvidence:
        """The same evidence, with the start of a standard output that was no envelope."""
        return RunEvidence(self.returncode, self.signal, self.stderr_tail, _head(stdout))

    @property
    def ended(self) -> str:
        """``exited with status 1``, ``was killed by SIGKILL (status 137)`` or ``...0``."""
        if self.signal:
            return f"was killed by {self.signal} (status {self.returncode})"
        if self.returncode is None:
            return "did not report an exit status"
        return f"exited with status {self.returncode}"

    @property
    def crashed(self) -> bool:
        """Whether the process ended with a non-zero status or a signal."""
        return bool(self.signal) or (self.returncode is not None and self.returncode != 0)

    @property
    def last_line(self) -> str:
        """The last non-empty stderr line (a Python traceback's exception), or ``""``."""
        lines = [line for line in self.stderr_tail.splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""

    def summary(self) -> str:
        """One clause: how it ended and, if any, how its stderr ends."""
        said = f"the module {self.ended}"
        if self.last_line:
            said += f"; its stderr ends with {self.last_line[:200]!r}"
        return said

    def lines(self) -> list[str]:
        """The evidence as a block: the ending, the stdout head, the stderr tail."""
        out = [f"exit: {self.ended}"]
        if self.stdout_head:
            out += ["stdout (start):", *(f"  | {x}" for x in self.stdout_head.splitlines())]
        if self.stderr_tail:
            count = len(self.stderr_tail.splitlines())
            out += [f"stderr (last {count} lines):"]
            out += [f"  | {x}" for x in self.stderr_tail.splitlines()]
        else:
            out.append("stderr: empty")
        return out

"""One compaction, message by message: what the hook was offered, kept, dropped and added.

The plain call behind the compaction viewer widget: it needs a replay frame and the
messages the window held (read again from the store, page by page, or taken from the frame
the replay ran over).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from murmur_nb._conversations.store import Message
from murmur_nb._replay.sources import jobs_of, record_messages

__all__ = ["CompactionDiff", "compaction_diff"]


@dataclass(frozen=True)
class CompactionDiff:
    """One ``compact`` row of a replay, with the messages on both sides.

    ``before`` is the window offered (oldest first), ``after`` what the hook returned
    (empty when the call failed: see ``code`` and ``error``).
    """

    context_id: str
    hook_id: str
    window: int
    final: bool
    code: str | None
    error: str | None
    before: tuple[Message, ...]
    after: tuple[Message, ...]

    @property
    def ok(self) -> bool:
        return self.code is None

    def lines(self) -> list[tuple[str, Message]]:
        """``(status, message)`` in reading order: ``kept``, ``dropped`` or ``new``.

        A new message (one the hook made, such as a summary) is placed before the kept
        message that follows it in the hook's answer, or at the end. When the call failed
        the hook decided nothing: every offered message is ``offered``, none ``dropped``
        (the conversation is left as it was).
        """
        if not self.ok:
            return [("offered", m) for m in self.before]
        offered = {m.id for m in self.before}
        anchored: dict[str | None, list[Message]] = {}
        waiting: list[Message] = []
        for m in self.after:
            if m.id in offered:
                anchored.setdefault(m.id, []).extend(waiting)
                waiting = []
            else:
                waiting.append(m)
        anchored.setdefault(None, []).extend(waiting)
        kept = {m.id for m in self.after}
        out: list[tuple[str, Message]] = []
        for m in self.before:
            out += [("new", n) for n in anchored.pop(m.id, [])]
            out.append(("kept" if m.id in kept else "dropped", m))
        out += [("new", n) for n in anchored.pop(None, [])]
        return out

    def counts(self) -> dict[str, int]:
        """How many :meth:`lines` have each status (``offered``: a failed call's window)."""
        found = {"kept": 0, "dropped": 0, "new": 0, "offered": 0}
        for status, _ in self.lines():
            found[status] += 1
        return found


def _pick(results: Any, context_id: str, hook: str | None, window: int | None) -> Any:
    rows = results[(results["event"] == "compact") & (results["context_id"] == context_id)]
    if hook is not None:
        rows = rows[rows["hook_id"] == hook]
    if window is None:
        rows = rows[rows["final"].fillna(False).astype(bool)]
    else:
        rows = rows[rows["window"] == window]
    if rows.empty:
        raise LookupError(
            f"no compact row for record {context_id!r}, hook {hook or 'any'}, window "
            f"{window if window is not None else 'whole'} in these replay results; the "
            "windows there: " + ", ".join(map(str, sorted(set(results["window"].dropna()))))
        )
    return rows.iloc[0]


def compaction_diff(
    results: Any,
    context_id: str,
    *,
    hook: str | None = None,
    window: int | None = None,
    source: Any,
) -> CompactionDiff:
    """The messages of one compaction of a :func:`~murmur_nb.replay` frame.

    Parameters
    ----------
    results : pandas.DataFrame
        A replay frame.
    context_id, hook, window
        Which row: ``hook`` defaults to the first hook, ``window`` to the whole record.
    source : ConversationStore, HookHost or DataFrame
        Where the offered messages come from: the store the replay read (or the host's),
        or the frame it ran over.
    """
    row = _pick(results, context_id, hook, window)
    if hasattr(source, "columns"):
        jobs = [j for j in jobs_of(source, None) if j.context_id == context_id]
        messages: Sequence[Message] = jobs[0].messages or () if jobs else ()
    else:
        store = getattr(source, "conversations", source)
        messages = record_messages(store, context_id)
    end = int(row["window"])
    output = row["output"] if isinstance(row["output"], list) else []
    code = None if row["ok"] else str(row["code"])
    return CompactionDiff(
        context_id, str(row["hook_id"]), end, bool(row["final"]), code,
        None if row["ok"] else str(row["error"]), tuple(messages[:end]), tuple(output),
    )  # fmt: skip

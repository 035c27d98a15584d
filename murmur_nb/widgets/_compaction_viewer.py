"""A compaction, message by message: pick a record, a hook and a window of a replay.

The plain call is :func:`murmur_nb._replay.diff.compaction_diff` (through
``CompactionViewer.diff``); this view draws it. Two columns: the window the hook was
offered, dropped messages struck through, and what it returned, new messages (a summary)
marked. A message's content is cut at :data:`SHOWN_CHARS`, its id and role at a label's
length, and the hook's error as a module's message is (a hook's answer may be 16 MiB). A
failed call (a trap, fuel or memory exhausted) decided nothing: it reads as a
failure, the offered messages plain and none counted or struck as dropped. Every mark is
a border, a badge or a line through the text, never a tinted background, so both
JupyterLab themes keep their own contrast; static HTML shows the same.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from murmur_nb._render.card import said
from murmur_nb._replay.diff import CompactionDiff, compaction_diff
from murmur_nb._rules import clipped
from murmur_nb.widgets._html import BORDER, FG, FG_MUTED, TextView, badge, esc, tone_colour

__all__ = ["CompactionViewer"]

#: characters of a message's content shown (the rest is cut with a marker)
SHOWN_CHARS = 240
_MARK = {"kept": "muted", "dropped": "error", "new": "info", "offered": "muted"}


def _content(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return esc(text)
    return esc(text[:SHOWN_CHARS] + f" … (+{len(text) - SHOWN_CHARS})")


def _message_html(status: str, m: Any) -> str:
    body = _content(m.content)
    if status == "dropped":
        body = f"<del>{body}</del>"
    mark = badge("new", "info") if status == "new" else ""
    head = f"{mark}<b>{esc(clipped(m.role))}</b> <code>{esc(clipped(m.id))}</code>"
    return (
        f'<div class="murmur-msg murmur-msg-{status}" style="border-left:4px solid '
        f'{tone_colour(_MARK[status])};padding:1px 6px;margin:2px 0;color:'
        f'{FG_MUTED if status == "dropped" else FG}">'
        f'<div class="murmur-msg-head">{head}</div>'
        f'<div class="murmur-msg-body" style="overflow-wrap:anywhere">{body}</div></div>'
    )


def diff_html(diff: CompactionDiff) -> str:
    """The compaction as static HTML: a header, then offered | returned."""
    c = diff.counts()
    window = "whole record" if diff.final else f"first {diff.window} messages"
    where = (f"<b>{esc(diff.context_id)}</b> · hook <b>{esc(diff.hook_id)}</b> · "
             f"{esc(window)} · ")  # fmt: skip
    if diff.ok:
        head = (
            f'<div class="murmur-compaction-head" data-state="ok">{badge("ok", "ok")}{where}'
            f"{len(diff.before)} → {len(diff.after)} messages "
            f"{badge(str(c['kept']) + ' kept', 'muted')}"
            f"{badge(str(c['dropped']) + ' dropped', 'error')}"
            f"{badge(str(c['new']) + ' new', 'info')}</div>"
        )
    else:  # a failure reads as one: nothing was returned, so nothing is shown dropped
        head = (
            f'<div class="murmur-compaction-head" data-state="failed">'
            f"{badge(f'failed: {diff.code}', 'error')}{where}{_failed_words(diff)}</div>"
            f'<pre class="murmur-compaction-error">{esc(said(diff.error or ""))}</pre>'
        )
    lines = diff.lines()
    offered = "".join(_message_html(s, m) for s, m in lines if s != "new")
    returned = "".join(_message_html(s, m) for s, m in lines if s not in ("dropped", "offered"))
    if not diff.ok:
        returned = f"<div>nothing: the hook failed ({esc(diff.code)})</div>"
    column = (
        f"flex:1 1 320px;min-width:0;border:1px solid {BORDER};padding:4px 8px;"
        "max-height:36em;overflow:auto"
    )
    return (
        f'<div class="murmur-compaction" style="color:{FG}">{head}'
        f'<div style="display:flex;flex-wrap:wrap;gap:8px">'
        f'<div class="murmur-compaction-before" style="{column}"><b>Offered</b>{offered}</div>'
        f'<div class="murmur-compaction-after" style="{column}"><b>Returned</b>'
        f"{returned or '<div>nothing</div>'}</div></div></div>"
    )


def _failed_words(diff: CompactionDiff) -> str:
    return (f"{len(diff.before)} messages offered; the hook failed, so it returned nothing and "
            "dropped nothing: the conversation is left as it was")  # fmt: skip


class CompactionViewer(TextView):
    """Pick a record, hook and window of a replay; see what compaction kept and dropped.

    Parameters
    ----------
    results : pandas.DataFrame
        A :func:`murmur_nb.replay` frame.
    source : ConversationStore, HookHost or DataFrame
        Where the offered messages come from: the replay's store (or its host), or the
        frame the replay ran over.
    context_id, hook, window : optional
        The first row to show (default: the first record, first hook, whole record).

    Raises
    ------
    ValueError
        The results have no compact rows, or none for ``context_id``.

    Attributes
    ----------
    record, hook, window : ipywidgets.Dropdown
        The pickers; setting ``.value`` redraws.
    diff : CompactionDiff
        What is shown (``diff.lines()`` gives each message's status).
    """

    def __init__(self, results: Any, source: Any, *, context_id: str | None = None,
                 hook: str | None = None, window: int | None = None) -> None:  # fmt: skip
        self.results = results[results["event"] == "compact"]
        if self.results.empty:
            raise ValueError("these replay results have no compact rows to view")
        self.source = source
        records = list(dict.fromkeys(self.results["context_id"]))
        if context_id is not None and context_id not in records:
            raise ValueError(
                f"these replay results have no compact rows for record {context_id!r}; "
                f"pass one of the records they have: {', '.join(map(str, records))}"
            )
        first = context_id if context_id is not None else records[0]
        self.record = w.Dropdown(description="Record", options=records, value=first)
        self.hook = w.Dropdown(description="Hook")
        self.window = w.Dropdown(description="Window")
        self.view = w.HTML()
        self._refill(hook, window)
        self.record.observe(lambda _c: self._refill(None, None), names="value")
        self.hook.observe(lambda _c: self._refill(self.hook.value, None), names="value")
        self.window.observe(lambda _c: self._draw(), names="value")
        super().__init__([w.HBox([self.record, self.hook, self.window]), self.view])
        self.add_class("murmur-compaction-viewer")

    def _rows(self, hook: str | None = None) -> Any:
        rows = self.results[self.results["context_id"] == self.record.value]
        return rows if hook is None else rows[rows["hook_id"] == hook]

    def _refill(self, hook: str | None, window: int | None) -> None:
        self._drawing = False
        hooks = list(dict.fromkeys(self._rows()["hook_id"]))
        self.hook.options = hooks
        self.hook.value = hook if hook in hooks else hooks[0]
        ends = [int(x) for x in self._rows(self.hook.value)["window"]]
        self.window.options = [(f"{e} messages" + (" (whole)" if e == ends[-1] else ""), e)
                               for e in ends]  # fmt: skip
        self.window.value = window if window in ends else ends[-1]
        self._drawing = True
        self._draw()

    def _draw(self) -> None:
        if not getattr(self, "_drawing", False) or self.window.value is None:
            return
        self.diff = compaction_diff(self.results, self.record.value, hook=self.hook.value,
                                    window=self.window.value, source=self.source)  # fmt: skip
        self.view.value = diff_html(self.diff)

    def text(self) -> str:
        d, c = self.diff, self.diff.counts()
        where = f"CompactionViewer: {d.context_id} / {d.hook_id} / window {d.window}" + (
            " (whole)" if d.final else "")  # fmt: skip
        if not d.ok:
            return f"{where}: failed: {d.code}; {_failed_words(d)}"
        return (
            f"{where}: ok; {len(d.before)} -> {len(d.after)} "
            f"messages ({c['kept']} kept, {c['dropped']} dropped, {c['new']} new)"
        )

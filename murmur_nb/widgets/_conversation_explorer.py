"""Page through one conversation record, newest first, the way a hook reads it.

The explorer is a cursor stack over :meth:`ConversationReader.read_messages`: ``Older``
pushes the page's ``next_cursor``, ``Newer`` pops back. Pages are anchored at the oldest
message, so a cursor stays valid while the runtime appends; the *newest* page (cursor
``None``) is the only one that moves, and ``Refresh`` re-reads the current page, updating
the live ``total``.

"to DataFrame" is :func:`murmur_nb.read_conversation` run inside the explorer's output
area, so the library's own progress bar (``tqdm.auto``: a widget in a kernel, text
elsewhere) is the one shown.

The role filter applies to the page being shown (the API pages by position, not by
role); the status line says how many of the page's messages it hides.
"""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as w

from murmur_nb._conversations import tool_envelope
from murmur_nb._conversations.frames import read_conversation
from murmur_nb._exceptions import ConversationReadError, MurmurError
from murmur_nb.widgets._html import TextView, badge, esc, set_output

__all__ = ["ConversationExplorer"]

_ALL = "all"
_SHORT = 120


class _Note:
    """A line of text for an Output widget."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _short(text: str, n: int = _SHORT) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= n else one_line[: n - 1] + "…"


class ConversationExplorer(TextView):
    """Browse a conversation record page by page.

    Parameters
    ----------
    store : ConversationStore
    context_id : str
    page_size : int
        Messages per page (the reader clamps it to 1..100).
    granted : bool
        Passed to ``store.reader``; ``False`` shows what an ungranted hook gets.

    Attributes
    ----------
    page
        The last page read (``.messages``, ``.next_cursor``, ``.total``), or ``None``.
    error
        The :class:`~murmur_nb.ConversationReadError` of the last read, or ``None``.
    older_button, newer_button, refresh_button, dataframe_button : ipywidgets.Button
    role_filter : ipywidgets.Dropdown
    frame_out : ipywidgets.Output
        Where "to DataFrame" shows its progress bar, then the frame.
    dataframe
        The DataFrame built by :meth:`to_dataframe`, or ``None``.
    """

    def __init__(
        self, store: Any, context_id: str, *, page_size: int = 20, granted: bool = True
    ) -> None:
        self.store = store
        self.context_id = context_id
        self.page_size = page_size
        self.reader = store.reader(context_id, granted=granted)
        self.page: Any = None
        self.error: Any = None
        self.dataframe: Any = None
        self._stack: list[str | None] = [None]
        self.older_button = w.Button(description="◀ Older")
        self.newer_button = w.Button(description="Newer ▶")
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.role_filter = w.Dropdown(description="Role", options=[_ALL], value=_ALL)
        self.status = w.HTML()
        self.messages = w.HTML()
        self.dataframe_button = w.Button(description="to DataFrame", icon="table")
        self.frame_out = w.Output()
        self.older_button.on_click(lambda _b: self.older())
        self.newer_button.on_click(lambda _b: self.newer())
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.dataframe_button.on_click(lambda _b: self._dataframe_clicked())
        self.role_filter.observe(lambda _c: self._draw(), names="value")
        super().__init__(
            [
                w.HTML(f"<b>Conversation</b> <code>{esc(context_id)}</code>"),
                w.HBox(
                    [self.older_button, self.newer_button, self.refresh_button, self.role_filter]
                ),
                self.status,
                self.messages,
                self.dataframe_button,
                self.frame_out,
            ]
        )
        self.refresh()

    # plain calls

    @property
    def page_number(self) -> int:
        """1 for the newest page, counting up towards older ones."""
        return len(self._stack)

    @property
    def total(self) -> int:
        """Messages in the record when the last page was served."""
        return int(self.page.total) if self.page is not None else 0

    def refresh(self) -> None:
        """Read the current page again (new messages, new total)."""
        self._read(self._stack[-1])

    def older(self) -> None:
        """The next page towards the oldest message."""
        if self.page is None or self.page.next_cursor is None:
            return
        self._stack.append(self.page.next_cursor)
        if not self._read(self._stack[-1]):
            self._stack.pop()

    def newer(self) -> None:
        """Back towards the newest message."""
        if len(self._stack) <= 1:
            return
        self._stack.pop()
        self._read(self._stack[-1])

    def visible_messages(self) -> list[Any]:
        """The current page's messages that pass the role filter, newest first."""
        if self.page is None:
            return []
        role = self.role_filter.value
        return [m for m in self.page.messages if role in (_ALL, m.role)]

    def to_dataframe(self, *, progress: bool = True) -> Any:
        """The whole record as a DataFrame, oldest first: :func:`murmur_nb.read_conversation`.

        The walk reuses this explorer's store (and its index). Its progress bar (tqdm,
        shown for records of a megabyte or more) is drawn inside the explorer, and the
        frame replaces it when the walk is done.
        """
        self.frame_out.outputs = ()
        with self.frame_out:
            frame = read_conversation(self.context_id, home=self.store, progress=progress)
        self.dataframe = frame
        set_output(self.frame_out, frame)
        self._draw()
        return frame

    # internals

    def _dataframe_clicked(self) -> None:
        try:
            self.to_dataframe()
        except MurmurError as exc:  # a button has no caller to raise to: show it
            self.frame_out.outputs = ()
            set_output(self.frame_out, _Note(f"to DataFrame failed: {exc.code}: {exc}"))

    def _read(self, cursor: str | None) -> bool:
        try:
            self.page = self.reader.read_messages(cursor, self.page_size)
            self.error = None
        except ConversationReadError as exc:
            self.error = exc
            self._draw()
            return False
        roles = sorted({m.role for m in self.page.messages} | set(self.role_filter.options))
        roles = [_ALL] + [r for r in roles if r != _ALL]
        if list(self.role_filter.options) != roles:
            current = self.role_filter.value
            self.role_filter.options = roles
            self.role_filter.value = current if current in roles else _ALL
        self._draw()
        return True

    def _draw(self) -> None:
        at_oldest = self.page is None or self.page.next_cursor is None
        self.older_button.disabled = at_oldest
        self.newer_button.disabled = len(self._stack) <= 1
        if self.error is not None:
            self.status.value = badge(str(self.error), "error")
            return
        shown = self.visible_messages()
        count = len(self.page.messages) if self.page is not None else 0
        hidden = count - len(shown)
        where = "newest" if self.page_number == 1 else ("oldest" if at_oldest else "")
        self.status.value = (
            f"page {self.page_number}{f' ({where})' if where else ''} · "
            f"{count} messages · total {badge(str(self.total), 'info')}"
            + (f" · {hidden} hidden by the role filter" if hidden else "")
        )
        self.messages.value = "".join(self._message_html(m) for m in shown)

    @staticmethod
    def _message_html(m: Any) -> str:
        tone = {"user": "info", "assistant": "ok", "tool": "warn", "system": "muted"}.get(
            m.role, "muted"
        )
        head = badge(m.role, tone) + (f" <code>{esc(m.name)}</code>" if m.name else "")
        head += f' <small style="color:#5f6368">{esc(m.id)}'
        head += f" · {esc(m.created_at)}</small>" if m.created_at else "</small>"
        envelope = tool_envelope.decode(m.content) if m.role == "tool" else None
        if envelope is not None:
            flag = (
                badge("error", "error")
                if envelope["is_error"]
                else badge("ok", "ok")
                if envelope["is_error"] is False
                else badge("is_error: null", "muted")
            )
            body = json.dumps(envelope["body"], indent=2, ensure_ascii=False)
            text = (
                f"tool_call_id <code>{esc(envelope['tool_call_id'])}</code> {flag}"
                f"<pre style='margin:2px 0;max-height:12em;overflow:auto'>{esc(body)}</pre>"
            )
        else:
            text = f"<div style='white-space:pre-wrap'>{esc(m.content)}</div>"
        return (
            "<div style='border-left:3px solid #dadce0;padding:2px 8px;margin:4px 0'>"
            f"{head}{text}</div>"
        )

    def text(self) -> str:
        head = f"ConversationExplorer {self.context_id}: "
        if self.error is not None:
            return head + f"error {self.error}"
        shown = self.visible_messages()
        count = len(self.page.messages) if self.page is not None else 0
        lines = [
            head + f"page {self.page_number}, {count} of {self.total} messages, "
            f"role {self.role_filter.value}"
            + (f" ({len(shown)} shown)" if self.role_filter.value != _ALL else "")
            + (", oldest page" if self.page is not None and self.page.next_cursor is None else "")
        ]
        for m in shown:
            envelope = tool_envelope.decode(m.content) if m.role == "tool" else None
            if envelope is not None:
                body = json.dumps(envelope["body"], ensure_ascii=False)
                lines.append(
                    f"  {m.role} tool_call_id={envelope['tool_call_id']} "
                    f"is_error={json.dumps(envelope['is_error'])} body={_short(body)}"
                )
            else:
                lines.append(f"  {m.role}: {_short(m.content)}")
        if self.dataframe is not None:
            lines.append(f"  DataFrame: {len(self.dataframe)} rows")
        return "\n".join(lines)

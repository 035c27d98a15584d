"""Page through one conversation record the way a hook reads it, shown like a DataFrame.

The explorer walks :meth:`ConversationReader.read_messages` page by page. A page it shows
is known by where it ends, counted from the oldest message, as the read API anchors its
cursors (SPEC §3): appends never move it, so ``Older`` goes on from the page shown (its
``next_cursor``) and never repeats a message, ``Newer`` shows the messages directly after
it, and ``Refresh`` re-reads the same messages with the live ``total``. Only the newest page
(cursor ``None``) follows the record as it grows: there ``Refresh`` shows new messages. A
cursor for any other end is one the explorer was handed: by a page it read, or by reading
the newest page with a ``limit`` that makes its ``next_cursor`` land there, then hopping
down. Page numbers count from the newest page as the record stands now.

A context the store has no record of reads as an empty record, as a hook's read does (the
runtime may not have written it yet); the status line and the text form warn about it, as
:class:`~murmur_nb.widgets.HookConsole` does, until a read finds the record.

Within a page the messages are shown oldest first, the DataFrame's order: one compact row
each (role, id, time, name, tool call, a preview) that expands to the whole body, with
line breaks kept. "Find id" walks to the page holding a message id and opens it, and says
"not found" (staying on the page shown) when no page has it.

"to DataFrame" is :func:`murmur_nb.read_conversation` run inside the explorer's output
area, so the library's own progress bar (``tqdm.auto``: a widget in a kernel, text
elsewhere) is the one shown; the frame stays on the explorer as ``explorer.dataframe``.

A role or text filter applies to the whole record: the explorer walks it through the same
paginated API, newest first, reading at most ``scan_limit`` messages (the status line says
when it stopped short), and shows the newest ``shown_limit`` matches, oldest first. Page
navigation waits while a filter is set.
"""

from __future__ import annotations

import json
import os
from typing import Any

import ipywidgets as w

from murmur_nb._conversations import tool_envelope
from murmur_nb._conversations.frames import read_conversation
from murmur_nb._conversations.store import MAX_PAGE, ConversationStore
from murmur_nb._exceptions import ConversationReadError, MurmurError
from murmur_nb._rules import clipped, one_line, printable
from murmur_nb.widgets._html import (
    FG,
    FG_MUTED,
    TextView,
    badge,
    esc,
    require,
    set_output,
    tone_colour,
)

__all__ = ["ConversationExplorer"]

_ALL = "all"
#: the roles a record holds; others seen in the record are added to the role filter
_ROLES = ("user", "assistant", "tool", "system")
#: pages of this size are read when a filter walks the record
_WALK_PAGE = 100
_SHORT = 120
#: a body this short and on one line is shown whole in its row, with nothing to expand
_ONE_LINE = 90
#: characters of a message's body its row expands to; a longer one is cut, with a line
#: saying where it is whole (a record's 4 MB of quotes was 24 MB of the page's HTML)
BODY_CHARS = 10_000


class _Note:
    """A line of text for an Output widget."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _fit() -> w.Layout:
    """A button as wide as its label: never cut."""
    return w.Layout(width="auto", min_width="max-content")


def _searchable(m: Any) -> str:
    """What the text filter looks in: the body as shown (a tool body decoded), name, id."""
    envelope = tool_envelope.decode(m.content) if m.role == "tool" else None
    if envelope is None:
        body = str(m.content)
    else:
        raw = envelope["body"]
        body = f"{envelope['tool_call_id']} " + (raw if isinstance(raw, str) else json.dumps(raw))
    return f"{m.id} {m.name or ''} {body}".lower()


def unknown_context_warning(store: Any, context_id: str) -> str | None:
    """A warning when ``store`` has no record of ``context_id``, else ``None``.

    ``None`` too for a source that cannot list its contexts (it has no ``contexts()``).
    """
    contexts = getattr(store, "contexts", None)
    if contexts is None:
        return None
    try:
        known = list(contexts())
    except ConversationReadError as exc:  # a folder it cannot list: say why
        return f"context {context_id!r}: the store's records cannot be listed ({exc})"
    if context_id in known:
        return None
    listed = ", ".join(known[:5]) or "none"
    return f"context {context_id!r} has no record in the store (it has: {listed})"


def _cut_line(body: str) -> str:
    """What a body cut at :data:`BODY_CHARS` left out, and where it is whole; else ``""``."""
    if len(body) <= BODY_CHARS:
        return ""
    more = f"… {len(body) - BODY_CHARS:,} more characters: Message.content keeps it whole"
    return f'<div style="color:{FG_MUTED}">{esc(more)}</div>'


class ConversationExplorer(TextView):
    """Browse a conversation record page by page.

    Parameters
    ----------
    store : ConversationStore, or its home folder (``str`` or path)
    context_id : str
    page_size : int
        Messages per page (the reader clamps it to 1..100).
    granted : bool
        Passed to ``store.reader``; ``False`` shows what an ungranted hook gets.
    scan_limit : int
        The most messages a filter or "Find id" reads from the record (newest first).
    shown_limit : int, optional
        The most filter matches shown (the newest ones); ``page_size`` by default.

    Attributes
    ----------
    page
        The last page read (``.messages``, ``.next_cursor``, ``.total``), or ``None``.
    error
        The :class:`~murmur_nb.ConversationReadError` of the last read, or ``None``.
    newest_button, older_button, newer_button, oldest_button : ipywidgets.Button
    refresh_button, dataframe_button, find_button : ipywidgets.Button
    page_input : ipywidgets.BoundedIntText
        The page shown (1 is the newest); type a number to go there.
    role_filter : ipywidgets.Dropdown
        Only messages of this role, across the whole record.
    text_filter : ipywidgets.Text
        Only messages whose content holds this text (case-insensitive), across the record.
    matches : list
        The filters' matches, newest first (empty without a filter).
    scanned : int
        How many messages the last filter walk read.
    find_input : ipywidgets.Text
        A message id; Enter (a new ``.value``) or ``find_button`` finds it.
    unknown_context : str or None
        A warning when the store has no record of ``context_id`` (shown as empty), else
        ``None``; set by each read of the newest page.
    frame_out : ipywidgets.Output
        Where "to DataFrame" shows its progress bar, then the frame.
    dataframe
        The DataFrame built by :meth:`to_dataframe` ("to DataFrame"), or ``None``.
    """

    def __init__(
        self,
        store: Any,
        context_id: str,
        *,
        page_size: int = 20,
        granted: bool = True,
        scan_limit: int = 20_000,
        shown_limit: int | None = None,
    ) -> None:
        if isinstance(store, str | os.PathLike):  # a home, as read_conversation takes it
            store = ConversationStore(store)
        require(store, "reader", "ConversationExplorer",
                "a ConversationStore or a home folder (the one holding conversations/)")
        self.store = store
        self.context_id = context_id
        self.page_size = page_size
        self.scan_limit = scan_limit
        self.shown_limit = page_size if shown_limit is None else shown_limit
        self.matches: list[Any] = []
        self.scanned = 0
        self._scan_complete = True
        self.reader = store.reader(context_id, granted=granted)
        self.page: Any = None
        self.error: Any = None
        self.dataframe: Any = None
        self.unknown_context: str | None = None
        #: where the page shown ends (a position from the oldest), ``None`` for the newest
        self._end: int | None = None
        #: cursors handed out so far, by the position the page they name ends at
        self._cursor_at: dict[int, str] = {}
        self.opened: str | None = None
        #: what the last find() could not find (shown until the next page is drawn)
        self.notice = ""
        self.newest_button = w.Button(description="« Newest", layout=_fit())
        self.newer_button = w.Button(description="◀ Newer", layout=_fit())
        self.page_input = w.BoundedIntText(
            value=1, min=1, max=1, description="Page", layout=w.Layout(width="130px")
        )
        self.page_count = w.Label()
        self.older_button = w.Button(description="Older ▶", layout=_fit())
        self.oldest_button = w.Button(description="Oldest »", layout=_fit())
        self.refresh_button = w.Button(description="Refresh", icon="refresh", layout=_fit())
        #: the role filter's roles, as the record has them (its labels are escaped, cut)
        self._roles: list[str] = [_ALL, *_ROLES]
        self.role_filter = w.Dropdown(description="Role", options=self._roles, value=_ALL)
        self.text_filter = w.Text(
            description="Contains", placeholder="text, then Enter", continuous_update=False
        )
        self.find_input = w.Text(
            description="Find id", placeholder="message id, then Enter", continuous_update=False
        )
        self.find_button = w.Button(description="Go", layout=_fit())
        self.status = w.HTML()
        self.messages = w.HTML()
        self.dataframe_button = w.Button(
            description="to DataFrame",
            icon="table",
            tooltip="the whole record as a DataFrame, kept as explorer.dataframe",
        )
        self.frame_out = w.Output()
        self.newest_button.on_click(lambda _b: self.go_to_page(1))
        self.newer_button.on_click(lambda _b: self.newer())
        self.older_button.on_click(lambda _b: self.older())
        self.oldest_button.on_click(lambda _b: self.oldest())
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.find_button.on_click(lambda _b: self.find(self.find_input.value.strip()))
        self.dataframe_button.on_click(lambda _b: self._dataframe_clicked())
        self.page_input.observe(self._page_typed, names="value")
        self.role_filter.observe(lambda _c: self._filter(), names="value")
        self.text_filter.observe(lambda _c: self._filter(), names="value")
        self.find_input.observe(self._find_typed, names="value")
        nav = [
            self.newest_button,
            self.newer_button,
            self.page_input,
            self.page_count,
            self.older_button,
            self.oldest_button,
            self.refresh_button,
        ]
        super().__init__(
            [
                w.HTML(f"<b>Conversation</b> <code>{esc(context_id)}</code>"),
                w.HBox(nav),
                w.HBox([self.role_filter, self.text_filter, self.find_input, self.find_button]),
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
        """1 for the newest page, counting up towards older ones, as the record stands."""
        if self._end is None:
            return 1
        if self.page is not None and self.page.next_cursor is None:
            return self.page_total
        return min(self.page_total, 1 + -(-(self.total - self._end) // self._served_size))

    @property
    def page_total(self) -> int:
        """How many pages the record has now."""
        return max(1, -(-self.total // self._served_size))

    @property
    def total(self) -> int:
        """Messages in the record when the last page was served."""
        return int(self.page.total) if self.page is not None else 0

    def refresh(self) -> None:
        """Read the page shown again (new total; on the newest page, new messages)."""
        self._show(self._end)

    def older(self) -> None:
        """The page just before the one shown (towards the oldest message)."""
        if self.page is None or self.page.next_cursor is None or self.error is not None:
            return
        self._show(self._start())

    def newer(self) -> None:
        """The messages just after the page shown; the newest page once they reach it."""
        if self._end is None:
            return
        total = self._newest_total()
        if total is not None:
            target = self._end + self._served_size
            self._show(None if target >= total else target)

    def oldest(self) -> None:
        """The page holding the oldest message."""
        self.go_to_page(1 << 62)

    def go_to_page(self, number: int) -> bool:
        """Show page ``number`` (1 is the newest, as the record stands now); past the oldest
        page, the oldest. ``False`` when a read failed (the error is shown)."""
        if number <= 1:
            return self._show(None)
        total = self._newest_total()
        if total is None:
            return False
        number = min(number, max(1, -(-total // self._served_size)))
        end = total - (number - 1) * self._served_size
        return self._show(None if number == 1 else end)

    def find(self, message_id: str) -> bool:
        """Walk to the page holding ``message_id`` and open it.

        ``False``, staying on the page shown and saying "not found", when none of the
        newest ``scan_limit`` messages has that id.
        """
        start, number = self._end, 1
        while message_id and (number - 1) * self._served_size < self.scan_limit:
            if not self.go_to_page(number):
                return False
            if any(m.id == message_id for m in self.page.messages):
                self.opened = message_id
                self.role_filter.value = _ALL
                self.text_filter.value = ""
                self._draw()
                return True
            if self.page.next_cursor is None:
                break
            number += 1
        whole = self.page is not None and self.page.next_cursor is None
        self._show(start)
        where = "in this record" if whole else f"in the newest {self.scan_limit} messages"
        self.notice = f"not found: no message {message_id!r} {where}"
        self.status.value += " · " + badge(self.notice, "warn")
        return False

    @property
    def filtering(self) -> bool:
        """Whether a role or text filter is set."""
        return self.role_filter.value != _ALL or bool(self.text_filter.value.strip())

    def visible_messages(self) -> list[Any]:
        """What is shown, oldest first: the page, or the newest matches of the filters."""
        if self.filtering:
            return list(reversed(self.matches[: self.shown_limit]))
        return [] if self.page is None else list(reversed(self.page.messages))

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
        where = _Note(f"{len(frame)} rows, oldest first; in code: explorer.dataframe")
        set_output(self.frame_out, where, frame)
        self._draw()
        return frame

    # internals

    @property
    def _served_size(self) -> int:
        """Messages a full page holds: ``page_size`` as the reader clamps it."""
        return max(1, min(self.page_size, MAX_PAGE))

    def _passes(self, m: Any) -> bool:
        role = self.role_filter.value
        needle = self.text_filter.value.strip().lower()
        return role in (_ALL, m.role) and (not needle or needle in _searchable(m))

    def _filter(self) -> None:
        """Walk the record, newest first, for the filters' matches (within ``scan_limit``)."""
        self.matches, self.scanned = [], 0
        cursor: str | None = None
        while self.filtering and self.scanned < self.scan_limit:
            try:
                page = self.reader.read_messages(
                    cursor, min(_WALK_PAGE, self.scan_limit - self.scanned)
                )
            except ConversationReadError as exc:
                self.error = exc
                break
            self.scanned += len(page.messages)
            self.matches.extend(m for m in page.messages if self._passes(m))
            cursor = page.next_cursor
            if cursor is None:
                break
        self._scan_complete = cursor is None
        self._draw()

    def _filter_status(self) -> str:
        what = [f"role {self.role_filter.value}"] if self.role_filter.value != _ALL else []
        if self.text_filter.value.strip():
            what.append(f"containing {self.text_filter.value.strip()!r}")
        found = len(self.matches)
        where = (
            f"the whole record ({self.scanned} messages)"
            if self._scan_complete
            else f"the newest {self.scanned} of {self.total} messages (scan_limit)"
        )
        shown = f", the newest {self.shown_limit} shown" if found > self.shown_limit else ""
        return f"{' and '.join(what)}: {found} matches in {where}{shown}"

    def _dataframe_clicked(self) -> None:
        try:
            self.to_dataframe()
        except MurmurError as exc:  # a button has no caller to raise to: show it
            self.frame_out.outputs = ()
            set_output(self.frame_out, _Note(f"to DataFrame failed: {exc.code}: {exc}"))

    def _page_typed(self, change: Any) -> None:
        if change["new"] != self.page_number:
            self.go_to_page(int(change["new"]))

    def _find_typed(self, change: Any) -> None:
        if change["new"].strip():  # a cleared box is not a search
            self.find(change["new"].strip())

    def _start(self) -> int:
        """Where the page shown starts (a position from the oldest message)."""
        end = self.total if self._end is None else self._end
        return end - len(self.page.messages)

    def _read(self, cursor: str | None, limit: int, end: int | None) -> Any:
        """Read a page ending at ``end`` (``None``: the newest) and keep its next cursor."""
        page = self.reader.read_messages(cursor, limit)
        start = (page.total if end is None else end) - len(page.messages)
        if page.next_cursor is not None:
            self._cursor_at[start] = page.next_cursor
        return page

    def _newest_total(self) -> int | None:
        """The record's total now (one message read); ``None`` when the read failed."""
        try:
            return int(self._read(None, 1, None).total)
        except ConversationReadError as exc:
            self.error = exc
            self._draw()
            return None

    def _cursor_for(self, end: int) -> str | None:
        """A cursor naming the page that ends at ``end``; ``None`` when that is the newest.

        From the nearest cursor above ``end`` (the newest page when there is none), one
        read with a ``limit`` that makes its ``next_cursor`` land on ``end``, hopping down
        by 100 when it is further than that.
        """
        while end not in self._cursor_at:
            above = min((at for at in self._cursor_at if at > end), default=None)
            if above is None:
                total = self._read(None, 1, None).total
                if total <= end:
                    return None
                continue
            self._read(self._cursor_at[above], min(MAX_PAGE, above - end), above)
        return self._cursor_at[end]

    def _read_page(self, end: int | None) -> Any:
        """The page ending at ``end`` (``None``: the newest page)."""
        cursor = None if end is None else self._cursor_for(end)
        page = self._read(cursor, self.page_size, end if cursor is not None else None)
        if cursor is None:
            self.unknown_context = (
                unknown_context_warning(self.store, self.context_id) if page.total == 0 else None
            )
        return page

    def _show(self, end: int | None) -> bool:
        """Read the page ending at ``end`` (``None``: the newest) and draw it; ``False`` if
        the read failed. A cursor from before the record was rewritten is
        ``invalid-cursor``: the cursors are dropped, and ``Newest`` starts afresh."""
        try:
            self.page = self._read_page(end)
            self.error = None
        except ConversationReadError as exc:
            if exc.code == "invalid-cursor":
                self._cursor_at.clear()
            self.error = exc
            self._draw()
            return False
        self._end = None if end is None or end >= self.page.total else end
        seen = {m.role for m in self.page.messages} - {_ALL, *self._roles}
        if seen:
            current = self.role_filter.value
            self._roles = roles = [*self._roles, *sorted(seen)]
            labels = [printable(clipped(role)) for role in roles]
            pairs = list(zip(labels, roles, strict=True))
            self.role_filter.options = roles if labels == roles else pairs
            self.role_filter.value = current if current in roles else _ALL
        self._draw()
        return True

    def _draw(self) -> None:
        at_oldest = self.page is None or self.page.next_cursor is None
        for button in (self.older_button, self.oldest_button):
            button.disabled = at_oldest or self.error is not None or self.filtering
        for button in (self.newer_button, self.newest_button):
            button.disabled = self._end is None or self.filtering
        self.page_input.disabled = self.filtering
        self.page_input.max = max(self.page_total, self.page_number)
        self.page_input.value = self.page_number
        self.page_count.value = f"of {self.page_total}"
        self.notice = ""
        if self.error is not None:
            self.status.value = badge(str(self.error), "error")
            return
        shown = self.visible_messages()
        count = len(self.page.messages) if self.page is not None else 0
        where = "newest" if self.page_number == 1 else ("oldest" if at_oldest else "")
        head = (
            esc(self._filter_status())
            if self.filtering
            else f"page {self.page_number} of {self.page_total}{f' ({where})' if where else ''}"
            f" · {count} messages"
        )
        warning = self.unknown_context
        warning = f" · {badge('warning', 'warn')}{esc(warning)}" if warning else ""
        self.status.value = (
            f"{head}, oldest first · total {badge(str(self.total), 'info')}{warning}"
        )
        self.messages.value = (
            f'<div class="murmur-messages" style="color:{FG}">'
            + "".join(self._message_html(m, opened=m.id == self.opened) for m in shown)
            + "</div>"
        )

    @staticmethod
    def _message_html(m: Any, *, opened: bool = False) -> str:
        tone = {"user": "info", "assistant": "ok", "tool": "warn", "system": "muted"}.get(
            m.role, "muted"
        )
        ident = esc(clipped(m.id))
        fields = [f"<code>{ident}</code>"]
        if m.created_at:
            fields.append(f'<span class="murmur-field">{esc(clipped(m.created_at))}</span>')
        if m.name:
            fields.append(
                f'<span class="murmur-field">name <code>{esc(clipped(m.name))}</code></span>'
            )
        envelope = tool_envelope.decode(m.content) if m.role == "tool" else None
        if envelope is not None:
            flag = (
                badge("error", "error")
                if envelope["is_error"]
                else badge("ok", "ok")
                if envelope["is_error"] is False
                else badge("is_error: null", "muted")
            )
            fields.append(
                f'<span class="murmur-field">tool_call_id '
                f"<code>{esc(clipped(envelope['tool_call_id']))}</code></span>{flag}"
            )
            raw = envelope["body"]
            body = raw if isinstance(raw, str) else json.dumps(raw, indent=2, ensure_ascii=False)
        else:
            body = str(m.content)
        sep = f'<span style="color:{FG_MUTED}"> · </span>'
        style = f"border-left:3px solid {tone_colour(tone)};padding:1px 8px;margin:2px 0"
        role = badge(clipped(m.role), tone)
        if "\n" not in body and len(body) <= _ONE_LINE:  # all of it fits the row
            row = role + sep.join([*fields, esc(body)])
            return f'<div class="murmur-message" data-id="{ident}" style="{style}">{row}</div>'
        preview = f'<span style="color:{FG_MUTED}">{esc(one_line(body, _ONE_LINE))}</span>'
        summary = role + sep.join(fields) + sep + preview
        return (
            f'<details class="murmur-message" data-id="{ident}"{" open" if opened else ""} '
            f'style="{style}"><summary>{summary}</summary>'
            f"<pre style='margin:2px 0;white-space:pre-wrap;max-height:24em;overflow:auto;"
            f"color:{FG}'>{esc(clipped(body, BODY_CHARS))}</pre>{_cut_line(body)}</details>"
        )

    def text(self) -> str:
        head = f"ConversationExplorer {self.context_id}: "
        if self.error is not None:
            return head + f"error {self.error}"
        shown = self.visible_messages()
        count = len(self.page.messages) if self.page is not None else 0
        lines = [
            head + self._filter_status()
            if self.filtering
            else head + f"page {self.page_number} of {self.page_total}, {count} of {self.total} "
            "messages, role all"
            + (", oldest page" if self.page is not None and self.page.next_cursor is None else "")
        ]
        if self.unknown_context:
            lines[0] += f" · warning: {self.unknown_context}"
        if self.notice:
            lines[0] += f" · {self.notice}"
        for m in shown:
            envelope = tool_envelope.decode(m.content) if m.role == "tool" else None
            if envelope is not None:
                body = json.dumps(envelope["body"], ensure_ascii=False)
                lines.append(
                    f"  {m.role} tool_call_id={envelope['tool_call_id']} "
                    f"is_error={json.dumps(envelope['is_error'])} body={one_line(body, _SHORT)}"
                )
            else:
                lines.append(f"  {m.role}: {one_line(m.content, _SHORT)}")
        if self.dataframe is not None:
            lines.append(f"  DataFrame: {len(self.dataframe)} rows (explorer.dataframe)")
        return "\n".join(lines)

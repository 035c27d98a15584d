"""Fire hook events by hand and look at what every hook returned.

Both buttons are one plain call each: ``hooks.task_start(task_id=..., context_id=...)``
and ``hooks.compact(messages, context_id=...)``. For ``compact`` the console hands the hooks
the newest page of the chosen context, read through the same :class:`ConversationStore`, so
what a hook keeps can be compared with what it was given (a hook that reads during
compaction reads that context's record too).

``text/plain`` shows each result's outcome, value and output but not its time or fuel,
which vary from run to run; the live HTML shows both, with stdout and stderr open. The text
names the murmur home ``$MURMUR_HOME``, and the folder of a ``murmur.yaml`` kept elsewhere
``<folder of murmur.yaml>`` (by that file's name), as
:class:`~murmur_nb.widgets.ModuleBrowser` names its home ``$FACET_STUDIO_HOME``: it reads
the same on any machine, while the live HTML keeps the paths this machine can open. A context
the store has no record of is warned about beside the picker and above the results: the
hooks still run (a runtime may fire before anything was written), but "0 messages" then
does not look like a quiet success.

What a hook returned or wrote (a note, an err string, both up to the result limit's 16 MiB)
is cut as a module's message is (:func:`~murmur_nb._render.card.said`, 2,000 characters) in
the HTML as in the text: the whole stays on :attr:`HookConsole.results`.
"""

from __future__ import annotations

import os
from typing import Any

import ipywidgets as w

from murmur_nb._conversations.store import check_context_id
from murmur_nb._exceptions import MurmurError
from murmur_nb._render.card import said
from murmur_nb._rules import one_line
from murmur_nb.widgets._conversation_explorer import unknown_context_warning
from murmur_nb.widgets._html import TextView, badge, esc, portable, require, volatile

__all__ = ["HookConsole"]

_SHORT = 160


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        roles = ", ".join(getattr(m, "role", "?") for m in value[:8])
        more = f", … {len(value) - 8} more" if len(value) > 8 else ""
        return f"{len(value)} messages kept ({roles}{more})"
    return str(value)


def _hook_entries(hooks: Any) -> list[Any]:
    entries = hooks.hooks
    if isinstance(entries, dict):
        return list(entries.values())
    return list(entries)


def _grant_text(entry: Any) -> str:
    granted = getattr(entry, "read_granted", None)
    if granted is None:
        granted = getattr(getattr(entry, "grants", None), "read", None)
    return "conversation.read granted" if granted else "no grants (reads are not-granted)"


def _notes(entry: Any) -> tuple[str, ...]:
    """What ``murmur.yaml`` says that grants nothing (``read: yes``, ``raed:``)."""
    return tuple(getattr(entry, "notes", ()) or ())


def _load_error(entry: Any) -> str | None:
    for attr in ("load_error", "error"):
        value = getattr(entry, attr, None)
        if value:
            return str(value)
    return None


def _limits_text(entry: Any) -> str:
    limits = getattr(entry, "limits", None)
    if limits is None:
        return ""
    parts = [f"{limits.time_ms} ms", f"{limits.memory_mib} MiB"]
    if getattr(limits, "fuel", None) is not None:
        parts.append(f"fuel {limits.fuel}")
    return "limits " + ", ".join(parts)


def _component_name(entry: Any) -> str:
    component = getattr(entry, "component", "")
    name = getattr(component, "name", None)
    return str(name) if name else str(component).rsplit("/", 1)[-1]


class HookConsole(TextView):
    """The hooks of a :class:`~murmur_nb.HookHost`, and a place to fire their events.

    Parameters
    ----------
    hooks : HookHost, or the path of a ``murmur.yaml``
        The hooks; a path is loaded with :meth:`HookHost.from_config
        <murmur_nb.HookHost.from_config>` (and ``conversations``).
    conversations : ConversationStore, optional
        Where the context ids come from (and the messages handed to ``compact``); by
        default the store the hook host was built with.
    task_id : str
        Initial task id for ``task-start``.
    context_id : str, optional
        The context to fire with, selected in ``context_picker`` (a plain context id,
        checked here; one the store has no record of is accepted and warned about). By
        default the store's first context in sorted order.

    Attributes
    ----------
    context_picker : ipywidgets.Combobox
        The context to fire with; offers the store's contexts, accepts any id.
    task_id : ipywidgets.Text
    task_start_button, compact_button : ipywidgets.Button
    event : str or None
        The last event fired (``task-start`` or ``compact``).
    results : dict
        Hook id -> HookResult of the last event.
    compact_input : list
        The messages handed to the last ``compact``.
    """

    def __init__(
        self,
        hooks: Any,
        conversations: Any = None,
        *,
        task_id: str = "task-1",
        context_id: str | None = None,
    ) -> None:
        if context_id is not None:
            check_context_id(context_id)  # before anything is loaded
        if isinstance(hooks, str | os.PathLike):  # a murmur.yaml: its hooks, loaded here
            from murmur_nb._hooks.host import HookHost  # noqa: PLC0415 - wasmtime when used

            hooks = HookHost.from_config(hooks, conversations=conversations)
        require(hooks, "hooks", "HookConsole", "a HookHost (mnb.HookHost.from_config("
                "'murmur.yaml')) or the path of a murmur.yaml")
        self.hooks = hooks
        self.conversations = (
            conversations if conversations is not None else getattr(hooks, "conversations", None)
        )
        self.event: str | None = None
        self.results: dict[str, Any] = {}
        self.compact_input: list[Any] = []
        self.error: Exception | None = None
        contexts = list(self.conversations.contexts()) if self.conversations is not None else []
        if context_id is None:
            context_id = contexts[0] if contexts else ""
        self.context_picker = w.Combobox(
            description="Context",
            options=contexts,
            value=context_id,
            placeholder="context id",
            ensure_option=False,
        )
        self.task_id = w.Text(description="Task id", value=task_id)
        self.task_start_button = w.Button(description="Fire task-start", button_style="primary")
        self.compact_button = w.Button(description="Fire compact")
        self.compact_limit = w.BoundedIntText(
            description="Messages",
            value=20,
            min=1,
            max=100,
            tooltip="how many of the newest messages compact is given",
        )
        self.hook_list = w.HTML(self._hooks_html())
        self.result_view = w.HTML()
        self.context_warning = w.HTML()
        self.context_picker.observe(lambda _c: self._check_context(), names="value")
        self.task_start_button.on_click(lambda _b: self.fire_task_start())
        self.compact_button.on_click(lambda _b: self.fire_compact())
        super().__init__(
            [
                self.hook_list,
                w.HBox([self.context_picker, self.task_id, self.context_warning]),
                w.HBox([self.task_start_button, self.compact_button, self.compact_limit]),
                self.result_view,
            ]
        )
        self._check_context()

    # plain calls

    @property
    def unknown_context(self) -> str | None:
        """A warning when the chosen context has no record in the store, else ``None``."""
        if self.conversations is None:
            return None
        if not self.context_picker.value:
            return "no context chosen: pick one of the store's contexts"
        return unknown_context_warning(self.conversations, self.context_picker.value)

    def _check_context(self) -> None:
        warning = self.unknown_context
        shown = badge("unknown context", "warn", title=warning or "") if warning else ""
        self.context_warning.value = shown

    def fire_task_start(self) -> dict[str, Any]:
        """``hooks.task_start`` with the chosen task id and context."""
        self.event = "task-start"
        self.compact_input = []
        return self._fire(
            lambda: self.hooks.task_start(
                task_id=self.task_id.value, context_id=self.context_picker.value
            )
        )

    def fire_compact(self) -> dict[str, Any]:
        """``hooks.compact`` with the newest messages of the chosen context, oldest first."""
        self.event = "compact"
        self.compact_input = []

        def call() -> Any:
            if self.conversations is not None and self.context_picker.value:
                reader = self.conversations.reader(self.context_picker.value, granted=True)
                page = reader.read_messages(None, self.compact_limit.value)
                self.compact_input = list(reversed(page.messages))
            # the chosen context's record, also for a hook that reads during compaction
            # (without it, the host's current task: the last task-start fired, any context)
            return self.hooks.compact(self.compact_input,
                                      context_id=self.context_picker.value or None)  # fmt: skip

        return self._fire(call)

    def _fire(self, call: Any) -> dict[str, Any]:
        try:
            self.results = dict(call())
            self.error = None
        except MurmurError as exc:
            self.results = {}
            self.error = exc
        self.result_view.value = self._results_html()
        return self.results

    # drawing

    def _hooks_html(self) -> str:
        rows = []
        for h in _hook_entries(self.hooks):
            events = ", ".join(getattr(h, "events", ()) or ()) or "no events"
            error = _load_error(h)
            grant = _grant_text(h)
            rows.append(
                f"<li><b>{esc(h.id)}</b> <code>{esc(_component_name(h))}</code> "
                f"{badge(events, 'info')}"
                f"{badge(grant, 'ok' if 'granted' in grant and 'not' not in grant else 'muted')}"
                f"{badge(_limits_text(h), 'muted')}"
                + "".join(f"<br>{badge('note', 'warn')}{esc(said(n))}" for n in _notes(h))
                + (f"<br>{badge('load error', 'error')}{esc(said(error))}" if error else "")
                + "</li>"
            )
        return f"<b>Hooks</b><ul>{''.join(rows) or '<li>none configured</li>'}</ul>"

    def _results_html(self) -> str:
        if self.error is not None:
            code = getattr(self.error, "code", "error")
            return f"<div>{badge(str(code), 'error')}{esc(said(str(self.error)))}</div>"
        if self.event is None:
            return ""
        rows = []
        warning = self.unknown_context
        if warning:
            rows.append(f"<li>{badge('warning', 'warn')}{esc(warning)}</li>")
        for hook_id, r in self.results.items():
            outcome = (
                badge("ok", "ok") + f"<pre>{esc(said(_value_text(r.value)))}</pre>"
                if r.ok
                else badge(f"error: {r.code}", "error") + f"<pre>{esc(said(r.error or ''))}</pre>"
            )
            fuel = f" · fuel {r.fuel_used}" if getattr(r, "fuel_used", None) is not None else ""
            took = f"{getattr(r, 'duration_ms', 0):.1f} ms"
            meta = f"<small>{volatile(esc(took + fuel))}</small>"
            streams = "".join(
                f"<details open><summary>{name}</summary><pre>{esc(text)}</pre></details>"
                for name, text in (("stdout", r.stdout), ("stderr", r.stderr))
                if text
            )
            rows.append(f"<li><b>{esc(hook_id)}</b> {meta}{outcome}{streams}</li>")
        what = f"{esc(self.event)} on <code>{esc(self.context_picker.value)}</code>"
        return f"<div><b>{what}</b><ul>{''.join(rows) or '<li>no hook handles it</li>'}</ul></div>"

    def text(self) -> str:
        entries = _hook_entries(self.hooks)
        lines = ["HookConsole:"] if entries else ["HookConsole:", "  hooks: none configured"]
        for h in entries:
            events = ", ".join(getattr(h, "events", ()) or ()) or "no events"
            lines.append(f"  {h.id} ({_component_name(h)}) events: {events}; {_grant_text(h)}")
            if _limits_text(h):
                lines.append(f"    {_limits_text(h)}")
            lines += [f"    note: {said(n)}" for n in _notes(h)]
            error = _load_error(h)
            if error:
                lines.append(f"    load error: {said(error)}")
        if self.event is not None:
            lines.append(f"  fired {self.event} on {self.context_picker.value}:")
            if self.unknown_context:
                lines.append(f"    warning: {self.unknown_context}")
            if self.error is not None:
                error = said(str(self.error))
                lines.append(f"    error {getattr(self.error, 'code', '')}: {error}")
            for hook_id, r in self.results.items():
                if r.ok:
                    lines.append(f"    {hook_id}: ok {one_line(_value_text(r.value), _SHORT)}")
                else:
                    lines.append(f"    {hook_id}: error {r.code}: {one_line(str(r.error), _SHORT)}")
                for name, text in (("stdout", r.stdout), ("stderr", r.stderr)):
                    if text:
                        lines.append(f"      {name}: {one_line(text, _SHORT)}")
        return portable("\n".join(lines), self._folders())

    def _folders(self) -> dict[str, Any]:
        """The folders :meth:`text` names: the store's home, and murmur.yaml's folder."""
        home = getattr(self.conversations, "home", None)
        config = getattr(getattr(self.hooks, "config", None), "path", None)
        folders: dict[str, Any] = {}
        if config is not None and (
            home is None or os.path.realpath(config.parent) != os.path.realpath(home)
        ):
            folders[f"<folder of {config.name}>"] = config.parent
        if home is not None:
            folders["$MURMUR_HOME"] = home
        return folders

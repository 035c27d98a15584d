"""Every module the host sees: version, capabilities, effects, setup needs, refusals.

The browser is :meth:`ModuleHost.modules` drawn as compact cards, inspector style: each
capability is a button in its module's card, and clicking it opens its
:class:`CapabilityForm` right there, so the whole loop — find, fill, approve, run, look at
the artifacts — happens where the click was. A capability of a module that needs setup
opens its setup steps first; the form follows only when asked for. The picker offers the
same capabilities for the keyboard and always has one chosen.

List and detail, without a script
---------------------------------
The form's box (``form_box``) is placed in the clicked capability's card, right after its
row. Where the output is wide the open card becomes a two-column grid (inline ``Layout``
grid properties): the module's capability rows on the left, the form beside them from the
card's top, as MCP Inspector puts its form beside its list. Where the output is under
700 px a CSS container query turns the open card back into one column, so the form opens
right under the clicked row. Both are plain CSS on one set of widget views (no second view
of the form, no JavaScript), so Voila and JupyterLab behave alike, and the static HTML
(nbconvert, nbval) shows the form under its row.

The browser keeps a history of every run its forms sent, as MCP Inspector does: time,
capability, how it ended (``ok``; ``failed`` when the module ran and said not ok, crashed,
broke its envelope or ran out of time; ``refused`` when the host stopped it before anything
ran; ``cancelled``; ``stopped`` when polling a long-running job was stopped, the job perhaps
still running), duration and the input; a row's Show button draws the input and that run's
:class:`InvocationView` again (for a run the host cut short, under the host error's code and
message; the error alone when nothing came back), and its "Copy as code" button
writes the ``host.invoke(...)`` call that sends that input again into ``code_box`` (as MCP
Inspector copies a request, or a browser a request as cURL): a read-only text area, since
a click has no cell to put it after (see :mod:`murmur_nb.widgets._code_box`).

A module may declare thousands of capabilities: a card draws the first ``page_size`` rows
(50) and a "Show more" button under them, with how many it shows of how many; the filter
box (shown once some module has more than a page) keeps the rows and the picker to the
capabilities whose id, title or summary hold its text, and the picker lists at most
``PICKER_LIMIT`` (500). A row is built when it is first shown, so a browser over 20,000
capabilities is a few hundred widgets, not 160,000 (24 s and 124 MB of widget state in a
notebook); every capability stays one filter or "Show more" away, and opening one from
code (:meth:`ModuleBrowser.open_form`) draws its row in its card.

Each card also lists the module's knowledge: every capability's skills and the module's
agent overlays with their declared token estimates, and what the module costs an agent's
context (:class:`~murmur_nb.AgentListing`). Choosing a document in the knowledge list loads
it through the host (``load_skill`` / ``load_overlay``: verified by digest, audited) and
shows it through the Markdown primitive, digest in its header; a refused load shows its
code instead.

Every text a descriptor declares is shown cut by the one rule, before it is escaped: an
id, a name, a title, a version at a label's length (``_rules.clipped``), a summary, a
requirement's detail, a descriptor problem as a message (``said``). A 3 MB requirement
detail was 3 MB of the browser's HTML and text; the descriptor, ``setup_steps`` and the
picker's values keep every text whole.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import ipywidgets as w

from murmur_nb._exceptions import ModuleHostError
from murmur_nb._knowledge.agent_listing import AgentListing, agent_listing
from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.invocation import ModuleInfo
from murmur_nb._render.card import MAX_ROWS, first_rows, more_line, said
from murmur_nb._rules import clipped
from murmur_nb.protocol import Capability, Descriptor
from murmur_nb.widgets._capability_form import CapabilityForm
from murmur_nb.widgets._code_box import CodeBox, host_name, insert_next_cell, invoke_call
from murmur_nb.widgets._html import (
    BORDER,
    FG_MUTED,
    TextView,
    badge,
    effect_badges,
    effect_words,
    esc,
    portable,
    printable,
    require,
    volatile,
)
from murmur_nb.widgets._invocation_view import InvocationView

__all__ = ["BrowserRun", "ModuleBrowser", "format_validation_error"]

#: Under this output width the open card is one column: the form under the clicked row.
NARROW_PX = 700
#: The container query that does it (an ``!important`` rule beats the inline grid style).
_STYLE = (
    "<style>.murmur-browser{container-type:inline-size}"
    f"@container (max-width:{NARROW_PX}px){{.murmur-browser .murmur-card.murmur-open"
    "{display:flex !important;flex-direction:column}}</style>"
)
#: A history row's badge tone by how the run ended (any other end is an error).
_TONES = {"ok": "ok", "cancelled": "muted", "stopped": "warn"}
#: The open card's columns: the capability rows, then the form (never wider than the card).
_GRID = "minmax(0, 2fr) minmax(0, 3fr)"
#: Capability rows a card draws at first, and again at each "Show more" click.
PAGE_ROWS = 50
#: Capabilities the picker lists at most (those matching the filter, in order).
PICKER_LIMIT = 500
#: Where the knowledge list's skills and overlays are, all of them.
_ALL_DOCUMENTS = "ModuleBrowser.modules[i].descriptor.skills and .agent_overlays"
#: Capability ids a knowledge entry names as its skill's users; the others are counted.
LISTED_IDS = 10


@dataclass(frozen=True)
class BrowserRun:
    """One run a :class:`ModuleBrowser`'s form sent: when, what, with which input, how it
    ended, how long.

    ``invocations`` are the run's invocations (a long-running capability's start, then its
    last poll; for a run whose module crashed, the record the host's error carries; none
    when the host refused the call). ``status`` is ``ok``, ``failed`` (the module ran: it
    said not ok, crashed, broke its envelope or ran out of time), ``refused`` (nothing
    ran), ``cancelled`` or ``stopped`` (polling its job was stopped: the job may still
    run); ``outcome`` is ``ok`` or the error code; ``input`` is the
    request input sent and ``error`` the host's error, if it raised one; ``staged`` says
    whether the form handed the module staged artifacts.
    """

    time: datetime
    capability: str
    outcome: str
    duration_s: float
    invocations: tuple[Any, ...]
    status: str = "ok"
    input: Any = None
    error: Any = None
    staged: bool = False

    @property
    def invocation(self) -> Any:
        """The run's last invocation (what its InvocationView shows), or ``None``."""
        return self.invocations[-1] if self.invocations else None

    def code(self, host: str = "host") -> str:
        """The ``host.invoke(...)`` call that sends this run's input again."""
        return invoke_call(host, self.capability, self.input, staged=self.staged)

    def input_text(self, limit: int = 80) -> str:
        """The input as compact JSON, cut at ``limit`` characters (the ``…`` one of them)."""
        text = json.dumps(self.input, separators=(",", ":"), default=str, sort_keys=True)
        return clipped(text, limit - 1)

    def line(self) -> str:
        said = self.status if self.outcome == self.status else f"{self.status} {self.outcome}"
        return (f"{self.time:%H:%M:%S} {clipped(self.capability)} {said} "
                f"{self.duration_s:.2f} s {self.input_text()}")  # fmt: skip


def format_validation_error(error: Any) -> str:
    """``path: detail`` for a validation error object, its ``str`` otherwise."""
    path = getattr(error, "path", None)
    detail = getattr(error, "detail", None)
    if path is not None and detail is not None:
        return f"{path}: {detail}" if path else str(detail)
    return str(error)


def _documents(info: ModuleInfo) -> list[tuple[str, tuple[str, str, str]]]:
    """Knowledge-list options of one module: its overlays, then its skills with their users."""
    d = info.descriptor
    assert d is not None
    users: dict[str, list[str]] = {}
    for cap in d.capabilities or ():
        for skill_id in cap.skills or ():
            users.setdefault(skill_id, []).append(cap.id)
    out = [
        (printable(f"{info.id} · overlay {clipped(o.id)} — {clipped(o.title)} · {o.tokens} tokens"),
         (info.id, "overlay", o.id))
        for o in d.agent_overlays or ()
    ]  # fmt: skip
    for s in d.skills or ():
        used = f" ({listed(users[s.id])})" if s.id in users else ""
        label = f"{info.id} · skill {clipped(s.id)} — {clipped(s.title)} · {s.tokens} tokens{used}"
        out.append((printable(label), (info.id, "skill", s.id)))
    return out


def listed(ids: list[str], shown: int = LISTED_IDS) -> str:
    """``a.x, a.y and 3 more``: the first ``shown`` of ``ids``, each cut to a label's length."""
    more = f" and {len(ids) - shown:,} more" if len(ids) > shown else ""
    return ", ".join(clipped(i) for i in ids[:shown]) + more


def _skills_html(descriptor: Descriptor, capability: Capability, whole: str) -> str:
    """The first skills a capability lists (``first_rows``), with their token estimates
    (unknown ids marked), and a line counting the others, naming ``whole``, the list that
    keeps them all."""
    declared = {s.id: s for s in descriptor.skills or ()}

    def item(skill_id: str) -> str:
        skill = declared.get(skill_id)
        if skill is None:
            return f"<code>{esc(clipped(skill_id))}</code> {badge('unknown skill', 'warn')}"
        return f"<code>{esc(clipped(skill_id))}</code> {skill.tokens} tokens"

    items = first_rows(capability.skills or [], item, esc(whole))  # the "more" line is ours
    if not items:
        return ""
    return f"<div class='murmur-skills'><small>skills: {', '.join(items)}</small></div>"


def matches(capability: Capability, query: str) -> bool:
    """Whether ``capability``'s id, title or summary holds ``query`` (any case; ``""``: all)."""
    if not query:
        return True
    text = f"{capability.id}\n{capability.title or ''}\n{capability.summary or ''}"
    return query.casefold() in text.casefold()


def showing_words(shown: int, matched: int, total: int, query: str) -> str:
    """``showing 50 of 20,000 capabilities`` (``matching …`` under a filter); ``""`` when
    every capability is shown."""
    if shown >= total:
        return ""
    said = f"showing {shown:,} of {matched:,} capabilities"
    return f"{said} matching {query!r} ({total:,} in all)" if query else said


@dataclass
class _Card:
    """One usable module's card: what it draws besides the open form, and how far it pages."""

    box: w.VBox
    head: w.Widget
    knowledge: w.Widget | None
    shown: int  # rows of its matching capabilities drawn (a multiple of the page size)
    ids: tuple[str, ...] = ()  # the capabilities whose row it draws
    matched: int = 0  # its capabilities that match the filter
    children: tuple[w.Widget, ...] = ()  # head, rows, the "showing" line, knowledge
    more: w.HBox | None = None  # the "showing" line and its button, once needed
    words: str = ""  # what that line says ("" when every row is drawn)


class ModuleBrowser(TextView):
    """Browse the modules of a :class:`~murmur_nb.ModuleHost` and open their capabilities.

    Parameters
    ----------
    host : ModuleHost

    Attributes
    ----------
    modules : list
        ``host.modules()`` as of the last refresh.
    page_size : int
        Capability rows a card draws at first and at each "Show more" (default 50).
    capability_buttons : dict
        Capability id -> its button in the module's card (click to open the form), for
        every row built so far: rows are built when first shown.
    capability_picker : ipywidgets.Dropdown
        The capabilities of the usable modules that match ``filter_box`` (the first chosen),
        at most ``PICKER_LIMIT`` (500) of them; ``open_button`` opens the chosen one.
    filter_box : ipywidgets.Text
        Keeps the cards' rows and the picker to the capabilities whose id, title or
        summary hold its text; shown once some module has more than ``page_size``
        capabilities, ``matching`` beside it counts them.
    form : CapabilityForm or None
        The form opened last.
    knowledge_picker : ipywidgets.Select
        Every skill and overlay of the usable modules, with token estimates; choosing one
        opens it (values are ``(module id, "skill" or "overlay", document id)``). Hidden
        when no module lists any; ``no_knowledge`` says so instead.
    document : KnowledgeDocument or None
        The document shown in ``document_view``; ``document_error`` when its load was refused.
    setup_steps : list of str
        The setup steps shown for the capability opened last (empty when it needs none).
    artifacts : list
        Verified artifacts the browser's forms produced; file inputs offer them.
    form_box : ipywidgets.VBox
        Holds the open form (or setup steps); it sits in the chosen capability's card.
    history : list of BrowserRun
        The runs this browser's forms made, oldest first; ``history_box`` lists them newest
        first, and :meth:`show_run` (a row's Show button) draws one in ``history_view``.
    code_box : CodeBox
        Where :meth:`copy_as_code` (a row's "Copy as code" button) shows a run's call.
    host_name : str or None
        The host's variable in generated code (``None``: the notebook's name for it).
    """

    def __init__(
        self, host: ModuleHost, *, host_name: str | None = None, page_size: int = PAGE_ROWS
    ) -> None:
        require(host, "modules", "ModuleBrowser",
                "a ModuleHost (mnb.ModuleHost(home=...), or home.host() of the demo)")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"ModuleBrowser page_size must be a whole number of rows, 1 or "
                             f"more (such as the default {PAGE_ROWS}), not {page_size!r}")
        self.host = host
        self.host_name = host_name
        self.page_size = page_size
        self.modules: list[ModuleInfo] = []
        self.form: CapabilityForm | None = None
        self.setup_steps: list[str] = []
        self.artifacts: list[Any] = []  # the session's verified artifacts, shared by its forms
        self.capability_buttons: dict[str, w.Button] = {}
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.summary = w.HTML()
        self.cards = w.VBox()
        self.capability_picker = w.Dropdown(
            description="Capability", options=[], layout=w.Layout(width="auto")
        )
        self.open_button = w.Button(description="Open form", button_style="primary")
        self.form_box = w.VBox(layout=w.Layout(min_width="0"))
        self.form_box.add_class("murmur-form-box")
        self.history: list[BrowserRun] = []
        self.history_box = w.VBox()
        self.history_box.add_class("murmur-history")
        self.code_box = CodeBox()
        self.history_view = w.VBox()
        self.history_view.add_class("murmur-history-view")
        self.shown_run: BrowserRun | None = None
        self._cards: dict[str, _Card] = {}
        self._rows: dict[str, tuple[str, w.Widget]] = {}
        self._capabilities: dict[str, tuple[ModuleInfo, Capability]] = {}
        self._open_id: str | None = None  # the capability form_box is placed beside
        self.filter_box = w.Text(
            description="Filter", placeholder="capability id, title or summary",
            layout=w.Layout(width="auto"),
        )  # fmt: skip
        self.filter_box.add_class("murmur-filter")
        self.matching = w.HTML()
        self._filter_line = w.HBox([self.filter_box, self.matching],
                                   layout=w.Layout(align_items="center"))  # fmt: skip
        self.listing: AgentListing | None = None
        self.document: Any = None
        self.document_error: ModuleHostError | None = None
        self.knowledge_picker = w.Select(
            description="Knowledge", options=[], rows=5, layout=w.Layout(width="95%")
        )
        self.no_knowledge = w.HTML(
            f"<small style='color:{FG_MUTED}'>Knowledge: no module lists skills or overlays"
            "</small>"
        )
        self.knowledge_note = w.HTML()
        self.document_view = w.HTML()
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.open_button.on_click(lambda _b: self._open_clicked())
        self.knowledge_picker.observe(self._document_chosen, names="value")
        self.filter_box.observe(lambda _c: self._filter_changed(), names="value")
        super().__init__(
            [
                w.HTML(_STYLE),
                w.HBox([self.refresh_button, self.summary]),
                w.HBox([self.capability_picker, self.open_button]),
                self._filter_line,
                self.cards,
                self.history_box,
                self.code_box,
                self.history_view,
                self.knowledge_picker,
                self.no_knowledge,
                self.knowledge_note,
                self.document_view,
            ]
        )
        self.add_class("murmur-browser")
        self.refresh(rescan=False)

    def _open_clicked(self, capability_id: str | None = None) -> None:
        try:
            self.open_form(capability_id or self.capability_picker.value)
        except ModuleHostError as exc:  # e.g. the module was changed and is now refused
            self.form = None
            self.form_box.children = (
                w.HTML(f"<div>{badge(exc.code, 'error')}{esc(said(exc.message))}</div>"),
            )
            self._place(capability_id or self.capability_picker.value)

    def _gate(self, descriptor: Descriptor, capability: Capability) -> list[str]:
        """Why the host's policy asks approval for ``capability`` (no module is run).

        This is the policy's standing rule; whether an operator already approved the
        current descriptor is asked of the host when the capability is run.
        """
        return list(self.host.policy.approval_reasons(descriptor, capability))

    def refresh(self, *, rescan: bool = True) -> None:
        """Ask the host again: modules added, fixed or changed show up.

        With ``rescan`` (the Refresh button) every module's ``describe`` is run anew
        through ``host.describe``, so a change anywhere in a module folder is seen, not
        only a change to its ``module`` executable; without it the host's cached
        descriptors are listed.
        """
        if rescan:
            for info in self.host.modules():
                # refused again (or gone): host.modules() below lists why
                with contextlib.suppress(ModuleHostError):
                    self.host.describe(info.id)
        self.modules = sorted(self.host.modules(), key=lambda m: m.id)
        self.listing = agent_listing(self.modules)
        self._capabilities = {
            cap.id: (m, cap)
            for m in self.modules
            if m.descriptor is not None
            for cap in m.descriptor.capabilities or ()
        }
        self.capability_buttons, self._cards, self._rows = {}, {}, {}
        self._open_id = None
        if self.form_box.children:  # the open form stays beside its capability
            self._open_id = self.form.capability_id if self.form else self.capability_picker.value
        self.cards.children = tuple(self._card_widget(m) for m in self.modules)
        if self._open_id is not None:
            self._place(self._open_id)
        refused = sum(1 for m in self.modules if m.descriptor is None)
        setup = sum(1 for m in self.modules if m.descriptor is not None and m.needs_setup)
        self.summary.value = (
            f"{len(self.modules)} modules"
            + (f" — {esc(self._empty_hint())}" if not self.modules else "")
            + (" " + badge(f"{refused} refused", "error") if refused else "")
            + (" " + badge(f"{setup} need setup", "warn") if setup else "")
            + " " + self._sandbox_badge()
        )
        self._list_matching()
        self._list_documents()

    def _list_documents(self) -> None:
        """The knowledge list: the usable modules' first ``PICKER_LIMIT`` (500) skills and
        overlays, and the one chosen; a line under it counts the others."""
        chosen = self.knowledge_picker.value
        every = [doc for m in self.modules if m.descriptor is not None for doc in _documents(m)]
        documents = every[:PICKER_LIMIT] + [d for d in every[PICKER_LIMIT:] if d[1] == chosen]
        self.knowledge_picker.options = documents
        # no skill or overlay anywhere: no empty list box, a line that says so
        self.knowledge_picker.layout.display = None if documents else "none"
        self.no_knowledge.layout.display = "none" if documents else None
        more = more_line(len(every) - len(documents), _ALL_DOCUMENTS, " skills and overlays",
                         "; browser.open_document(module_id, kind, id) opens any")  # fmt: skip
        self.knowledge_note.value = (f"<small style='color:{FG_MUTED}'>{esc(more)}</small>"
                                     if len(every) > len(documents) else "")  # fmt: skip
        if chosen in [value for _, value in documents]:
            self.knowledge_picker.value = chosen

    def _list_matching(self) -> None:
        """The picker's options and the filter's count: the capabilities matching it."""
        query = self.filter_box.value
        matched = [cap for _, cap in self._capabilities.values() if matches(cap, query)]
        total = len(self._capabilities)
        options = [_option(cap) for cap in matched[:PICKER_LIMIT]]
        chosen = self.capability_picker.value
        kept = self._capabilities.get(chosen)  # still chosen if it matches, listed or not
        if kept is not None and matches(kept[1], query) and _option(kept[1]) not in options:
            options.append(_option(kept[1]))
        self.capability_picker.options = options
        values = [v for _, v in options]
        if values:
            self.capability_picker.value = chosen if chosen in values else values[0]
        self.open_button.disabled = not options
        wide = any(len(m.descriptor.capabilities or ()) > self.page_size
                   for m in self.modules if m.descriptor is not None)  # fmt: skip
        shown = None if wide or query else "none"
        self._filter_line.layout.display = self.filter_box.layout.display = shown
        said = f"{len(matched):,} of {total:,} capabilities match" if query else (
            f"{total:,} capabilities")
        if len(matched) > PICKER_LIMIT:
            said += f"; the picker lists the first {PICKER_LIMIT:,}, filter to find the others"
        self.matching.value = f"<small style='color:{FG_MUTED}'>{esc(said)}</small>"

    def _pick(self, capability_id: str) -> None:
        """Choose ``capability_id`` in the picker, listing it there if the filter or the
        picker's limit left it out."""
        found = self._capabilities.get(capability_id)
        listed = [v for _, v in self.capability_picker.options]
        if found is not None and capability_id not in listed:
            self.capability_picker.options = (*self.capability_picker.options, _option(found[1]))
            self.open_button.disabled = False
        self.capability_picker.value = capability_id  # an unknown id: TraitError, as before

    def _filter_changed(self) -> None:
        """The filter's text changed: every card draws its first page of matches again."""
        for card in self._cards.values():
            card.shown = self.page_size
        self._redraw(list(self._cards))
        self._list_matching()

    def show_more(self, module_id: str) -> int:
        """Draw the next ``page_size`` rows of ``module_id``'s card (its "Show more" button);
        return how many of its matching capabilities the card draws now."""
        card = self._cards[module_id]
        card.shown += self.page_size
        self._redraw([module_id])
        return min(card.shown, card.matched)

    def _redraw(self, module_ids: list[str]) -> None:
        """Draw these cards' rows again, the open form (if any) beside its row."""
        for info in self.modules:
            if info.id in module_ids and info.id in self._cards:
                self._fill_card(info)
        if self.form_box.children and self._open_id is not None:
            self._place(self._open_id)

    def _document_chosen(self, change: Any) -> None:
        if change["new"] is not None:
            self.open_document(*change["new"])

    def open_document(self, module_id: str, kind: str, doc_id: str) -> Any:
        """Load a skill or overlay through the host and show it; ``None`` when refused. One
        the knowledge list leaves out (past its first ``PICKER_LIMIT``) is listed and chosen."""
        key = (module_id, kind, doc_id)
        if key not in self._document_keys():  # past the list's first 500: listed now
            info = next((m for m in self.modules if m.id == module_id and m.descriptor), None)
            self.knowledge_picker.options = (*self.knowledge_picker.options, *(
                d for d in (_documents(info) if info is not None else ()) if d[1] == key))
        if self.knowledge_picker.value != key and key in self._document_keys():
            self.knowledge_picker.value = key  # the list's observer loads it, once
            return self.document
        load = self.host.load_skill if kind == "skill" else self.host.load_overlay
        try:
            doc = load(module_id, doc_id)
        except ModuleHostError as exc:
            self.document, self.document_error = None, exc
            self.document_view.value = (
                f"<div>{badge(f'refused: {exc.code}', 'error')}{esc(said(exc.message))}</div>"
            )
            return None
        self.document, self.document_error = doc, None
        self.document_view.value = doc.render().html
        return doc

    def _document_keys(self) -> list[Any]:
        return [value for _, value in self.knowledge_picker.options]

    def _sandbox_badge(self) -> str:
        """How module processes are confined on this machine (``host.sandbox``)."""
        report = self.host.sandbox
        kind = "ok" if report.complete else ("error" if report.mode == "required" else "warn")
        return badge(f"sandbox: {report.confinement}", kind, title=str(report))

    def _module_of(self, capability_id: str) -> Any:
        found = self._capabilities.get(capability_id)
        return None if found is None else found[0]

    def open_form(self, capability_id: str | None, *, setup_first: bool = True) -> Any:
        """Open ``capability_id`` beside its row: its setup steps if its module needs setup
        (then ``None`` is returned; ``setup_first=False`` opens the form anyway), else its
        :class:`CapabilityForm`. The form open for it already stays as it is (what was
        typed, a run that is out), unless its module changed since."""
        if not capability_id:
            return None
        if self.capability_picker.value != capability_id:
            self._pick(capability_id)
        info = self._module_of(capability_id)
        if self._is_open(capability_id, info):
            return self.form
        self.setup_steps = list(info.setup_instructions) if info is not None else []
        if self.setup_steps and setup_first:
            self.form = None
            self.form_box.children = (self._setup_panel(capability_id, info),)
        else:
            self.form = CapabilityForm(
                self.host, capability_id, artifacts=self.artifacts, on_ran=self._record,
                host_name=self.host_name,
            )
            self.form_box.children = (self.form,)
        self._place(capability_id)
        return self.form

    def _is_open(self, capability_id: str, info: ModuleInfo | None) -> bool:
        """Whether the form shown is ``capability_id``'s, made from its module as listed."""
        form = self.form
        return (
            form is not None
            and form.capability_id == capability_id
            and self.form_box.children == (form,)
            and info is not None
            and info.descriptor == form.descriptor
        )

    def _place(self, capability_id: str) -> None:
        """Put ``form_box`` in the capability's card, after its row (drawn now if the card
        did not show it); that card becomes a two-column grid (one column under 700 px),
        the card open before goes back."""
        self._open_id = capability_id
        info = self._module_of(capability_id)
        drawn = self._cards.get(info.id) if info is not None else None
        if drawn is not None and capability_id not in drawn.ids:  # filtered out, or paged
            self._fill_card(info)
        module_id, row = self._rows.get(capability_id, ("", None))
        for mid, drawn in self._cards.items():
            card, base = drawn.box, drawn.children
            if mid == module_id and row is not None:
                at = base.index(row) + 1
                card.children = (*base[:at], self.form_box, *base[at:])
                _grid(card, base, self.form_box)
                card.add_class("murmur-open")
            elif "murmur-open" in card._dom_classes:
                card.children = base
                card.remove_class("murmur-open")
                _ungrid(card)

    # history

    def _record(self, form: CapabilityForm) -> None:
        """A form's run ended, however: add it to the history (newest row first)."""
        invocations, error = form.ran, form.ran_error
        last = invocations[-1] if invocations else None
        if error is not None:
            outcome = error.code
        elif last is not None and not last.ok:
            outcome = str(getattr(last.error, "code", "") or "error")
        else:
            outcome = form.ran_status
        took = sum(getattr(i, "duration_ms", 0.0) or 0.0 for i in invocations) / 1000
        run = BrowserRun(datetime.now(), form.capability_id, outcome, took, invocations,
                         form.ran_status, form.ran_input, error, bool(form.staged))  # fmt: skip
        rows = (self._history_row(run), *self.history_box.children[1:])
        head = w.HTML(f"<b>Runs</b> <small style='color:{FG_MUTED}'>newest first; Show draws "
                      "a run again</small>")  # fmt: skip
        self.history.append(run)
        self.history_box.children = (head, *rows)  # last: a watcher sees the whole run

    def _history_row(self, run: BrowserRun) -> w.Widget:
        capability = clipped(run.capability)
        show = w.Button(description="Show", tooltip=f"show this run of {capability} again",
                        layout=w.Layout(width="auto"))  # fmt: skip
        show.add_class("murmur-history-show")
        show.on_click(lambda _b: self.show_run(run))
        code = w.Button(description="Copy as code", icon="code", layout=w.Layout(width="auto"),
                        tooltip=f"the host.invoke(...) call that sends this input to "
                        f"{capability} again")  # fmt: skip
        code.add_class("murmur-history-code")
        code.on_click(lambda _b: self.copy_as_code(run))
        tone = _TONES.get(run.status, "error")
        said = run.status if run.outcome == run.status else f"{run.status}: {run.outcome}"
        line = w.HTML(
            f'<div class="murmur-history-row" data-status="{esc(run.status)}">'
            f'{volatile(f"{run.time:%H:%M:%S}")} '
            f"<code>{esc(capability)}</code> {badge(said, tone)}"
            f"{volatile(badge(f'{run.duration_s:.2f} s', 'muted'))}"
            f'<code class="murmur-history-input" title="the input sent">'
            f"{esc(run.input_text())}</code></div>"
        )
        return w.HBox([show, code, line], layout=w.Layout(align_items="center"))

    def copy_as_code(self, run: BrowserRun | None = None) -> str:
        """Show the ``host.invoke(...)`` call of ``run`` (the last run by default) in
        ``code_box`` and return it; called in a cell, it is also put in the next cell."""
        run = run if run is not None else self.history[-1]
        code = run.code(host_name(self.host, self.host_name))
        self.code_box.show(code, f"the {run.time:%H:%M:%S} run of {clipped(run.capability)}")
        insert_next_cell(code)
        return code

    def show_run(self, run: BrowserRun) -> w.Widget:
        """Draw a run from the history again, below the history: the input it sent, then
        its :class:`InvocationView` (returned; for a run the host cut short, its record
        under the host error's code and message), or the host's error when nothing came
        back."""
        self.shown_run = run
        sent = json.dumps(run.input, indent=2, default=str, sort_keys=True)
        head = w.HTML(
            f'<div class="murmur-history-shown"><b>{esc(clipped(run.capability))}</b> '
            f"{badge(run.status, _TONES.get(run.status, 'error'))}"
            f'<div>input:</div><pre class="murmur-history-sent">{esc(sent)}</pre></div>'
        )
        view: w.Widget
        if run.invocation is not None:  # with run.error when the host cut it short
            view = InvocationView(run.invocation, error=run.error)
        else:
            error = run.error
            view = w.HTML(
                f'<div class="murmur-error-box">{badge(error.code, "error")}'
                f"{esc(said(error.message))}</div>"
                if error is not None
                else f"<div>{badge(run.status, 'muted')}nothing came back</div>"
            )
        self.history_view.children = (head, view)
        return view

    def _setup_panel(self, capability_id: str, info: Any) -> w.Widget:
        rows = first_rows(
            info.unmet_requirements,
            lambda r: f"<b>{esc(clipped(r.kind))} {esc(clipped(r.name))}</b>: "
                      f"{esc(self._detail(r))}",
            "ModuleBrowser.setup_steps",  # the "more" line is ours, no markup
        )  # fmt: skip
        steps = "".join(f"<li>{row}</li>" for row in rows[:MAX_ROWS])
        more = "".join(f"<div>{row}</div>" for row in rows[MAX_ROWS:])
        note = w.HTML(
            f'<div class="murmur-setup"><b>{esc(clipped(capability_id))}</b> '
            f"{badge('Needs setup', 'warn')} module <code>{esc(info.id)}</code> needs this "
            f"before it can run:<ol>{steps}</ol>{more}Then click Refresh.</div>"
        )
        anyway = w.Button(
            description="Show the form anyway", tooltip="it will fail until set up",
            layout=w.Layout(width="auto"),  # the default width clips the label
        )  # fmt: skip
        anyway.on_click(lambda _b: self.open_form(capability_id, setup_first=False))
        return w.VBox([note, anyway])

    def _card_widget(self, info: Any) -> w.Widget:
        """One module: a header line, then a row per capability shown (button, badges,
        summary), then how many it shows of how many when not all, then its knowledge."""
        head = w.HTML(self._card_head(info))
        card = w.VBox([head])
        card.add_class("murmur-card")
        card.layout = w.Layout(border=f"1px solid {BORDER}", padding="2px 8px", margin="2px 0")
        if info.descriptor is None:
            return card
        knowledge = self._knowledge_html(info)
        self._cards[info.id] = _Card(card, head, w.HTML(knowledge) if knowledge else None,
                                     self.page_size)  # fmt: skip
        self._fill_card(info)
        return card

    def _fill_card(self, info: ModuleInfo) -> None:
        """Draw the card's rows: its first ``shown`` capabilities that match the filter, and
        the open one wherever it is."""
        d = info.descriptor
        assert d is not None  # only accepted modules have capability rows
        drawn, query = self._cards[info.id], self.filter_box.value
        caps = list(d.capabilities or ())
        matching = [cap for cap in caps if matches(cap, query)]
        page = matching[: drawn.shown]
        paged = {c.id for c in page}
        opened = [c for c in caps if c.id == self._open_id and c.id not in paged]
        drawn.ids, drawn.matched = tuple(c.id for c in (*page, *opened)), len(matching)
        drawn.words = showing_words(len(page), len(matching), len(caps), query)
        rows = [self._row(info, d, cap) for cap in (*page, *opened)]
        if drawn.words:
            rows.append(self._more_line(info.id, drawn, more=len(page) < len(matching)))
        if drawn.knowledge is not None:
            rows.append(drawn.knowledge)
        drawn.children = (drawn.head, *rows)
        drawn.box.children = drawn.children

    def _row(self, info: ModuleInfo, d: Descriptor, cap: Capability) -> w.Widget:
        """A capability's row (built the first time it is shown): its button, its line."""
        built = self._rows.get(cap.id)
        if built is not None and built[0] == info.id:
            return built[1]
        button = w.Button(
            description=printable(clipped(cap.id)),
            tooltip=printable(f"open {clipped(cap.id)}: {clipped(cap.title or cap.summary)}"),
            layout=w.Layout(width="auto", min_width="max-content"),
        )  # fmt: skip
        button.add_class("murmur-cap")
        button.on_click(lambda _b, cid=cap.id: self._open_clicked(cid))
        self.capability_buttons[cap.id] = button
        row = w.HBox([button, w.HTML(self._cap_line(info, d, cap))])
        self._rows[cap.id] = (info.id, row)
        return row

    def _more_line(self, module_id: str, drawn: _Card, *, more: bool) -> w.Widget:
        """``showing 50 of 20,000 capabilities`` and the "Show more" button (when more match)."""
        if drawn.more is None:
            button = w.Button(description=f"Show {self.page_size} more", icon="angle-down",
                              layout=w.Layout(width="auto"))  # fmt: skip
            button.add_class("murmur-show-more")
            button.on_click(lambda _b: self.show_more(module_id))
            drawn.more = w.HBox([w.HTML(), button], layout=w.Layout(align_items="center"))
        words, button = drawn.more.children
        words.value = (f"<small class='murmur-showing' style='color:{FG_MUTED}'>"
                       f"{esc(drawn.words)}</small>")  # fmt: skip
        button.layout.display = None if more else "none"
        return drawn.more

    def _card_head(self, info: Any) -> str:
        d = info.descriptor
        if d is None:
            errors = "".join(f"<li><code>{esc(line)}</code></li>" for line in self._errors(info))
            return f"<b>{esc(info.id)}</b> {badge('refused', 'error')}<ul>{errors}</ul>"
        head = f"<b>{esc(clipped(d.name or info.id))}</b> <code>{esc(info.id)}</code>"
        head += f" {badge('v' + clipped(d.version), 'muted')}" if d.version else ""
        if info.needs_setup:
            needs = "; ".join(map(esc, self._needs(info)))
            small = f"<small style='color:{FG_MUTED}'>{needs}</small>"
            head += f" {badge('Needs setup', 'warn')}{small}"
        return f'<div class="murmur-card-head">{head}</div>'

    def _whole(self, info: ModuleInfo, *attrs: Any) -> str:
        """Where the whole of a list the browser cuts is: ``ModuleBrowser.modules[2].errors``,
        ``…descriptor.capabilities[7].skills`` (an attribute, or an item of the list before)."""
        path = f"ModuleBrowser.modules[{_position(self.modules, info)}]"
        items: Any = info
        for attr in attrs:
            if isinstance(attr, str):
                path, items = f"{path}.{attr}", getattr(items, attr)
            else:
                path, items = f"{path}[{_position(items, attr)}]", attr
        return path

    def _errors(self, info: ModuleInfo) -> list[str]:
        """A refused module's first problems, each cut as a message, then how many more."""
        return first_rows(info.errors or [], lambda e: said(format_validation_error(e)),
                          self._whole(info, "errors"))  # fmt: skip

    def _needs(self, info: ModuleInfo) -> list[str]:
        """A module's first unmet requirements (``kind name: detail``), then how many more."""
        return first_rows(
            info.unmet_requirements,
            lambda r: f"{clipped(r.kind)} {clipped(r.name)}: {self._detail(r)}",
            self._whole(info, "unmet_requirements"),
        )

    def _warnings(self, info: ModuleInfo) -> list[str]:
        """What the host works around in a module: the first warnings, then how many more."""
        return first_rows(info.warnings, lambda e: said(format_validation_error(e)),
                          self._whole(info, "warnings"))  # fmt: skip

    def _detail(self, requirement: Any) -> str:
        """What a requirement's ``detail`` says (how to set it up), cut as a message is."""
        return self._portable(said(requirement.detail or "not available"))

    def _cap_line(self, info: Any, d: Any, cap: Any) -> str:
        extra = badge("long-running", "info") if cap.long_running else ""
        reasons = self._gate(d, cap)
        if reasons:
            extra += badge("needs approval", "warn", title="; ".join(map(said, reasons)))
        if info.needs_setup:
            extra += badge("needs setup", "warn")
        title = f"<b>{esc(clipped(cap.title))}</b> " if cap.title else ""
        summary = (f'<span style="color:{FG_MUTED}">{esc(said(cap.summary))}</span>'
                   if cap.summary else "")  # fmt: skip
        badges = effect_badges(cap.effects).removeprefix("<div>").removesuffix("</div>")
        whole = self._whole(info, "descriptor", "capabilities", cap, "skills")
        skills = _skills_html(d, cap, whole)
        return f'<div class="murmur-cap-line">{title}{extra}{badges} {summary}{skills}</div>'

    def _knowledge_html(self, info: ModuleInfo) -> str:
        """The module's overlays, its context cost, and what the host works around."""
        d = info.descriptor
        assert d is not None  # only accepted modules are drawn with their knowledge
        out = []
        overlays = ", ".join(first_rows(
            d.agent_overlays or [],
            lambda o: f"<code>{esc(clipped(o.id))}</code> {esc(clipped(o.title))} · "
                      f"{o.tokens} tokens",
            esc(self._whole(info, "descriptor", "agent_overlays")),  # the "more" line is ours
        ))  # fmt: skip
        if overlays:
            out.append(f"<div class='murmur-overlays'><small>overlays: {overlays}</small></div>")
        if self.listing is not None and info.id in self.listing.overlays:
            out.append(
                f"<div class='murmur-context-cost'><small>agent context: "
                f"{self.listing.module_tokens(info.id)} tokens always (capability lines and "
                "overlays), plus the skills of the capability in play</small></div>"
            )
        out += [f"<div>{badge('warning', 'warn')}<code>{esc(line)}</code></div>"
                for line in self._warnings(info)]  # fmt: skip
        return "".join(out)

    def _empty_hint(self) -> str:
        """Where the host looked for modules, and what to do, when it found none."""
        folder = self.host.modules_dir
        found = "does not exist" if not folder.is_dir() else "holds no module folder"
        return (f"{folder} {found}: install a module as {folder}/<module-id>/module, or "
                "give ModuleHost(home=...) the home that holds them")  # fmt: skip

    def text(self) -> str:
        lines = [f"ModuleBrowser: {len(self.modules)} modules"]
        if not self.modules:
            lines.append(f"  {self._empty_hint()}")
        for info in self.modules:
            d = info.descriptor
            if d is None:
                lines.append(f"  {info.id}: refused")
                lines.extend(f"    ✗ {line}" for line in self._errors(info))
                continue
            version = f" {clipped(d.version)}" if d.version else ""
            setup = " [Needs setup]" if info.needs_setup else ""
            lines.append(f"  {info.id}{version}{setup}")
            if info.needs_setup:
                lines.extend(f"    needs {line}" for line in self._needs(info))
            drawn = self._cards.get(info.id)
            for cap_id in drawn.ids if drawn is not None else ():
                cap = self._capabilities[cap_id][1]
                words = effect_words(cap.effects)
                if self._gate(d, cap):
                    words.append("needs approval")
                lines.append(f"    {clipped(cap.id)} [{', '.join(words)}]")
            if drawn is not None and drawn.words:
                lines.append(f"    … {drawn.words}")
            lines.extend(f"    ! {line}" for line in self._warnings(info))
        if self.document is not None:
            lines.append(f"  reading: {said(self.document.provenance())}")
        if self.document_error is not None:
            error = self.document_error
            lines.append(f"  refused {error.code}: {said(error.message)}")
        if self.form is not None:
            lines.append(f"  open: {clipped(self.form.capability_id)}")
        if self.history:
            last = self.history[-1]
            ended = last.status if last.outcome == last.status else f"{last.status} {last.outcome}"
            lines.append(f"  runs: {len(self.history)} (last: {clipped(last.capability)} {ended})")
        return self._portable("\n".join(lines))

    def _portable(self, text: str) -> str:
        """Name the host's home ``$FACET_STUDIO_HOME`` so the text is the same anywhere."""
        return portable(text, {"$FACET_STUDIO_HOME": self.host.home})


def _position(items: Any, item: Any) -> int:
    """Where ``item`` itself (not an equal one) is in ``items``."""
    return next(i for i, x in enumerate(items) if x is item)


def _option(cap: Capability) -> tuple[str, str]:
    """A capability in the picker: ``id — title``."""
    shown = f"{clipped(cap.id)} — {clipped(cap.title)}" if cap.title else clipped(cap.id)
    return (printable(shown), cap.id)


def _grid(card: w.VBox, rows: tuple[w.Widget, ...], form_box: w.VBox) -> None:
    """Lay ``card`` out as rows on the left and ``form_box`` beside them from the top.

    Each child is placed with ``grid_area`` alone: a widget view drawn anew (its card's
    children changed) applies its layout traits in order, and ``grid_area: null`` comes
    after ``grid_row`` / ``grid_column`` and removes them (``grid-area`` is their
    shorthand), so placing by those two works for the first form only. The rows get
    ``auto`` tracks and a last ``1fr`` track takes the rest of a tall form's height, so
    the rows keep their own height instead of spreading out beside it.
    """
    card.layout.display = "grid"
    card.layout.grid_template_columns = _GRID
    card.layout.grid_template_rows = f"repeat({len(rows)}, auto) 1fr"
    card.layout.grid_gap = "0 12px"
    for row in rows:
        row.layout.grid_area = "auto / 1 / auto / 2"
    form_box.layout.grid_area = f"1 / 2 / span {len(rows) + 1} / 3"


def _ungrid(card: w.VBox) -> None:
    """``card`` back to its plain column (the form went to another card)."""
    card.layout.display = card.layout.grid_template_columns = None
    card.layout.grid_template_rows = card.layout.grid_gap = None

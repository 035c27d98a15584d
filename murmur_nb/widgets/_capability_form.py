"""A form generated from a capability's request schema, with approval, then the result.

The checks live in :class:`murmur_nb._forms.form.SchemaForm`; this widget only mirrors
each input widget into it and shows its verdict beside the field. A field's "required"
mark turns into an error only once the field was touched or a run was attempted, so a
fresh form is not a wall of red.

The Run button starts a :class:`LiveRun` (the notebook stays usable: elapsed time, Cancel,
automatic polling of a long-running job); :meth:`CapabilityForm.run` is the same as one
blocking plain call. Running is three plain calls on the host:
:meth:`ModuleHost.prepare` (an :class:`~murmur_nb.ApprovalRequired` shows the approval
panel; it runs ``describe`` only when the module folder changed or a standing approval is
weighed, never once per click), :meth:`ModuleHost.approve` when the operator clicks
Approve, and :meth:`ModuleHost.invoke`. An
:class:`~murmur_nb.ApprovalRequired` raised by ``invoke`` (the descriptor changed between the
check and the run) brings the approval panel back with the host's reasons.

The header lists the skills the capability names, with their declared token estimates;
"Show skills" is one call, :meth:`ModuleHost.skills_for`, and shows what it loaded (verified,
through the Markdown primitive) and what it left out.

"Copy as code" writes the ``host.invoke(...)`` call that sends what the form holds now
(:func:`murmur_nb._forms.as_code.invoke_code`) into :attr:`CapabilityForm.code_box`, and into
the next cell when :meth:`CapabilityForm.copy_as_code` is called from a cell.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as w

from murmur_nb._exceptions import ApprovalRequired, ModuleHostError
from murmur_nb._forms.form import UNSET, FieldSpec, SchemaForm
from murmur_nb._modules.host import ModuleHost
from murmur_nb._render.card import first_rows, problems_of, said
from murmur_nb._rules import clipped
from murmur_nb.widgets._code_box import CodeBox, host_name, insert_next_cell, invoke_call
from murmur_nb.widgets._file_picker import FilePicker, is_file_ref
from murmur_nb.widgets._form_fields import Field, accessible_name, error_html, flatten
from murmur_nb.widgets._html import (
    FG_MUTED,
    TextView,
    badge,
    bundle_of,
    effect_badges,
    esc,
    field_label,
    require,
)
from murmur_nb.widgets._invocation_view import InvocationView
from murmur_nb.widgets._live_run import LiveRun

__all__ = ["CapabilityForm"]

#: The characters of one field's value in ``text/plain`` before its "…" when it is cut by
#: the one rule (:func:`~murmur_nb._rules.clipped`): 200 at most, as before.
TEXT_VALUE_CHARS = 199
#: Where the whole list of the capability's skills is (the form shows the first).
_ALL_SKILLS = "CapabilityForm.capability.skills"
#: The parts of a file input's ``{root, path}`` reference.
_REF_PARTS = ("root", "path")


def _json(value: Any) -> str:
    """A field's value in ``text/plain``: readable JSON (non-ASCII kept), cut when long."""
    return clipped(json.dumps(value, ensure_ascii=False), TEXT_VALUE_CHARS)


#: How a started run's polling ended early, as the form's status says it.
_POLLING_ENDS = {"stopped": "stopped polling", "cancelled": "cancelled while polling"}


class CapabilityForm(TextView):
    """Fill a capability's request from its JSON Schema, approve if needed, run, show.

    Parameters
    ----------
    host : ModuleHost
        The host that describes and invokes the module.
    capability_id : str
        A namespaced capability id such as ``"gallery.thumbs"``.
    values : Mapping, optional
        Initial values, nested like the request (``{"image": staged.ref()}``) or by dotted
        key (``{"image.root": "staged", "image.path": "sha256/..."}``: a file input's two
        parts make one reference); fields not named keep their schema default.
    staged : sequence of StagedArtifact, optional
        Artifacts staged with ``host.stage`` to hand to the module (``invoke(staged=...)``).
        They are also the first choices of every file input.
    artifacts : list of VerifiedArtifact, optional
        The session's verified artifacts, offered by file inputs (staged when chosen); the
        artifacts this form's runs produce are appended to it, so forms sharing the list
        (as a ModuleBrowser's do) offer each other's results.
    host_name : str, optional
        The host's variable in generated code; by default the notebook's name for ``host``
        (``host`` when it has none).

    Attributes
    ----------
    form : SchemaForm
        The headless form: values, coercion and errors.
    inputs : dict
        Field key -> the input widget (set ``.value`` to fill it).
    run_button, approve_button, cancel_button : ipywidgets.Button
        Run and Approve start a :class:`LiveRun` (see :attr:`live`); :meth:`wait` joins it.
        Reset while a run is out cancels that run, as the run's own Cancel does.
    state : str
        ``editing``, ``invalid``, ``needs_approval``, ``cancelled``, ``running``, ``ran``,
        ``failed`` (the module ran and crashed or broke its envelope) or ``refused`` (the
        host refused the call: nothing ran).
    ran, ran_input, ran_status, ran_error
        The last run that was sent, however it ended (what ``on_ran`` is called for):
        its invocations (a crash's is the host error's record), its input, ``ok``,
        ``failed``, ``refused``, ``cancelled`` or ``stopped`` (polling a long-running
        job was stopped: the job may still run), and the host's error.
    error : ModuleHostError or None
        What the host raised for the last run (``None`` once one returned): its message
        whole, where the status and the text cut it at 2,000 characters, as every display
        of a module's words (:func:`~murmur_nb._render.card.said`).
    approval_reasons : list of str
        The reasons shown in the approval panel (empty when it is hidden), each whole; the
        panel cuts each as a message.
    invocation
        The last invocation, or ``None``.
    result : InvocationView or None
        The view of the last invocation.
    skills_button : ipywidgets.Button
        Shown when the capability lists skills: loads them with ``host.skills_for``.
    skills : SkillSelection or None
        What "Show skills" loaded, shown in ``skills_box``.
    live : LiveRun or None
        The run started by the last click (it polls a long-running job by itself).
    code_button : ipywidgets.Button
        "Copy as code": :meth:`copy_as_code` shows the call in ``code_box``.
    """

    def __init__(
        self,
        host: ModuleHost,
        capability_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        staged: Sequence[Any] = (),
        artifacts: list[Any] | None = None,
        on_ran: Callable[[CapabilityForm], None] | None = None,
        host_name: str | None = None,
    ) -> None:
        require(host, "capability", "CapabilityForm",
                "a ModuleHost (mnb.ModuleHost(home=...), or home.host() of the demo)")  # fmt: skip
        self.host = host
        self.host_name = host_name
        self.on_ran = on_ran
        # the last run, whatever its end: its invocations (start, last poll; a crash's
        # record), the input it sent, how it ended and the host's error
        self.ran: tuple[Any, ...] = ()
        self.ran_input: Any = None
        self.ran_status = ""  # ok, failed (ran: module error or crash), refused, cancelled
        self.ran_error: ModuleHostError | None = None
        self._sent: Any = None  # the input of the run now out
        self._settled = threading.Event()  # set when _finished has taken a live run's end
        self.capability_id = capability_id
        self.staged = list(staged)
        self.artifacts: list[Any] = artifacts if artifacts is not None else []
        self.files: dict[str, FilePicker] = {}
        self.descriptor, self.capability = host.capability(capability_id)
        schemas = self.descriptor.request_schemas or {}
        schema = schemas.get(self.capability.request_schema, {})
        self.form = SchemaForm(schema if isinstance(schema, dict | bool) else {})
        self.state = "editing"
        self.approval_reasons: list[str] = []
        self.invocation: Any = None
        self.result: InvocationView | None = None
        self.error: ModuleHostError | None = None
        self._touched: set[str] = set()
        self._attempted = False

        self._fields: dict[str, Field] = {}
        body = self._build(self.form.root)
        self.inputs: dict[str, w.Widget] = {k: f.widget for k, f in self._fields.items()}
        self.inputs.update({k: picker.choice for k, picker in self.files.items()})

        cap = self.capability
        self._build_header()
        self._build_controls()
        super().__init__(
            [
                self.header,
                *([self.skills_button, self.skills_box] if cap.skills else []),
                body,
                w.HBox([self.run_button, self.reset_button, self.code_button]),
                self.code_box,
                self.approval_panel,
                self.status,
                self.result_box,
            ]
        )
        for key, raw in self._initial(values or {}):
            self.set_value(key, raw)
        self._touched.clear()
        self._refresh()

    # layout

    def _build_header(self) -> None:
        """The title, summary, effect badges and skills line, and the "Show skills" button."""
        cap = self.capability
        heading = (
            f"<h4 style='margin:4px 0'>{esc(clipped(cap.title or cap.id))} "
            f"<code>{esc(clipped(cap.id))}</code></h4>"
        )
        summary = f"<div>{esc(said(cap.summary))}</div>" if cap.summary else ""
        self.skills: Any = None
        self.skills_button = w.Button(description="Show skills", icon="book")
        self.skills_box = w.VBox()
        self.skills_button.on_click(lambda _b: self.show_skills())
        self.header = w.HTML(heading + summary + effect_badges(cap.effects) + self._skills_html())

    def _build_controls(self) -> None:
        """Run, Reset, the approval panel's buttons, the status line and the result box."""
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.reset_button = w.Button(description="Reset", tooltip="back to the defaults")
        self.approve_button = w.Button(description="Approve", button_style="warning")
        self.cancel_button = w.Button(description="Cancel")
        self.code_button = w.Button(
            description="Copy as code", icon="code", layout=w.Layout(width="auto"),
            tooltip="the host.invoke(...) call that sends this input",
        )  # fmt: skip
        self.code_button.add_class("murmur-copy-code")
        self.code_box = CodeBox()
        self.status = w.HTML()
        self.approval_text = w.HTML()
        self.approval_panel = w.VBox()
        self.result_box = w.VBox()
        self.live: LiveRun | None = None
        self.run_button.on_click(lambda _b: self.run(live=True))
        self.reset_button.on_click(lambda _b: self.reset())
        self.approve_button.on_click(lambda _b: self.approve(live=True))
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.code_button.on_click(lambda _b: self.copy_as_code())

    def _skill_labels(self) -> list[str]:
        """``"<id> (<tokens> tokens)"`` per skill of the first the capability lists (unknown
        ids marked), then a line counting the others (``first_rows``)."""
        declared = {s.id: s for s in self.descriptor.skills or ()}
        return first_rows(
            self.capability.skills or [],
            lambda sid: f"{clipped(sid)} ({declared[sid].tokens} tokens)"
            if sid in declared else f"{clipped(sid)} (unknown)",
            _ALL_SKILLS,
        )  # fmt: skip

    def _skills_html(self) -> str:
        declared = {s.id: s for s in self.descriptor.skills or ()}
        items = "".join(f"<li>{item}</li>" for item in first_rows(
            self.capability.skills or [],
            lambda sid: f"<code>{esc(clipped(sid))}</code> {esc(clipped(declared[sid].title))} · "
            f"{declared[sid].tokens} tokens" if sid in declared
            else f"<code>{esc(clipped(sid))}</code> {badge('unknown skill', 'warn')}",
            _ALL_SKILLS,  # the "more" line is ours, no markup
        ))  # fmt: skip
        return f"<div class='murmur-skills'>Skills:<ul>{items}</ul></div>" if items else ""

    def show_skills(self, budget_tokens: int | None = None) -> Any:
        """Load the capability's skills with ``host.skills_for`` and show them; return them."""
        try:
            selection = self.host.skills_for(self.capability_id, budget_tokens=budget_tokens)
        except ModuleHostError as exc:
            self._refused(exc)
            return None
        self.skills = selection
        self.skills_box.children = (w.HTML(bundle_of(selection)["text/html"]),)
        return selection

    def _build(self, spec: FieldSpec) -> w.Widget:
        if spec.path and is_file_ref(spec):
            return self._build_file(spec)
        if spec.kind == "object":
            kids = [self._build(child) for child in spec.children]
            if not spec.path:
                return w.VBox(kids)
            desc = f" <small>{esc(said(spec.description))}</small>" if spec.description else ""
            box = w.VBox(kids)
            box.layout.margin = "0 0 0 16px"
            title = field_label(spec.title, required=spec.required)
            return w.VBox([w.HTML(f"{title}{desc}"), box])
        field = Field(spec, self.form)
        self._fields[spec.key] = field

        def changed(_change: Any, key: str = spec.key) -> None:
            self._touched.add(key)
            self.form.set(key, self._fields[key].raw())
            if self.state in ("invalid", "cancelled"):
                self.state = "editing"
            self._refresh()

        field.widget.observe(changed, names="value")
        return field.box

    def _build_file(self, spec: FieldSpec) -> w.Widget:
        """A ``{root, path}`` field: a picker over the session's files, never typed."""

        def changed(picker: FilePicker, key: str = spec.key) -> None:
            ref = picker.ref() or {}
            for part in ("root", "path"):
                self.form.set(f"{key}.{part}", ref.get(part, ""))
            if picker.staged is not None and picker.staged not in self.staged:
                self.staged.append(picker.staged)
            self._touched.update({key, f"{key}.root", f"{key}.path"})
            self._refresh()

        picker = FilePicker(self.host, [*self.staged, *self.artifacts], changed,
                            name=accessible_name(spec))  # fmt: skip
        self.files[spec.key] = picker
        text = said(spec.description or "a file staged or produced in this session, or upload one")
        label = w.HTML(field_label(spec.title, required=spec.required))
        label.layout.width = "160px"
        help_line = w.HTML(f'<small style="color:{FG_MUTED}">{esc(text)}</small>')
        return w.VBox([w.HBox([label, picker.box]), help_line, picker.error_view])

    # plain calls

    def set_value(self, key: str, raw: Any) -> None:
        """Fill field ``key`` as a person would (text for numbers, the option for enums);
        a file input takes a ``{root, path}`` reference, or one part of it by dotted key."""
        if key in self.files:
            self.files[key].select_ref(raw)
            return
        head, _, part = key.rpartition(".")
        if head in self.files and part in _REF_PARTS:
            self.files[head].select_ref({**(self.files[head].ref() or {}), part: raw})
            return
        try:
            field = self._fields[key]
        except KeyError:
            self.form.field(key)  # raises the helpful KeyError
            raise
        field.show(raw)

    def _initial(self, values: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """``values=`` as ``(field key, raw)`` pairs; the dotted parts of a file input are
        gathered into one reference (set one at a time, the first would be a half)."""
        pairs: list[tuple[str, Any]] = []
        refs: dict[str, dict[str, Any]] = {}
        for key, raw in flatten(values, self.form):
            head, _, part = key.rpartition(".")
            if head in self.files and part in _REF_PARTS:
                refs.setdefault(head, {})[part] = raw
            else:
                pairs.append((key, raw))
        return pairs + list(refs.items())

    def visible_errors(self) -> dict[str, str]:
        """The errors shown beside fields now (``required`` only once touched or run)."""
        errors = self.form.errors()
        return {
            k: v
            for k, v in errors.items()
            if self._attempted or k in self._touched or v != "required"
        }

    def reset(self) -> None:
        """Defaults back in every field; errors and result cleared.

        A run that is out is cancelled (its processes killed, as by its Cancel): its card
        stays until it ended, and its end is taken as any run's (Run enabled again, the
        run reported ``cancelled`` to ``on_ran``).
        """
        self.form.reset()
        for key, field in self._fields.items():
            field.show(self.form.raw(key))
        self._touched.clear()
        self._attempted = False
        self._hide_approval()
        if self.live is not None and self._running():
            self.live.cancel()  # _finished takes its end
        else:
            self.state = "editing"
            self._clear_result()
        self._refresh()

    def _running(self) -> bool:
        """A run this form started is out: :meth:`_finished` has not taken its end yet."""
        return self.live is not None and not self._settled.is_set()

    def run(self, *, live: bool = False) -> Any:
        """Validate, ask for approval when needed, else invoke; returns the invocation or None.

        With ``live`` (the Run button) the call is started in the background as
        :attr:`live` and ``None`` is returned; :meth:`wait` waits for it.
        """
        if self._running():
            return None  # one run at a time: the first click's run is still out
        self._attempted = True
        self.error = None
        errors = self.form.errors()
        if errors:
            self.state = "invalid"
            self._clear_result()  # nothing ran: no earlier result may stand under "not run"
            self._refresh()
            return None
        try:  # the folder's stat walk: describe only when it changed, not once per click
            self.host.prepare(self.capability_id)
        except ApprovalRequired as exc:
            self._ask_approval(exc.reasons or [exc.message])
            return None
        except ModuleHostError as exc:  # needs setup, refused, gone: nothing ran
            self._sent = self.form.value()
            self._refused(exc)
            self._ended(exc)
            return None
        return self._start() if live else self._invoke()

    def code(self) -> str:
        """The ``host.invoke(...)`` call that sends what the form holds now."""
        return invoke_call(host_name(self.host, self.host_name), self.capability_id,
                           self.form.value(), staged=bool(self.staged))  # fmt: skip

    def copy_as_code(self) -> str:
        """Show :meth:`code` in ``code_box`` and return it; called in a cell, it is also
        put in the next cell."""
        code = self.code()
        self.code_box.show(code, f"this {clipped(self.capability_id)} input")
        insert_next_cell(code)
        return code

    def wait(self, timeout: float | None = 120.0) -> Any:
        """Wait for the live run (and its polling) to end; returns the invocation or None."""
        live = self.live
        if live is not None and not live.wait(timeout):
            raise TimeoutError(f"{self.capability_id} still running after {timeout} s")
        if live is not None:  # LiveRun says done just before it calls _finished: let it end
            self._settled.wait(timeout)
        return self.invocation

    def approve(self, *, live: bool = False) -> Any:
        """The operator approves: record it with the host and run."""
        if self.state != "needs_approval":
            return None
        self._hide_approval()
        try:
            self.host.approve(self.capability_id)
        except ModuleHostError as exc:
            self._refused(exc)
            return None
        return self._start() if live else self._invoke()

    def cancel(self) -> None:
        """The operator declines: nothing runs."""
        self._hide_approval()
        self.state = "cancelled"
        self._set_status(badge("cancelled", "muted") + "nothing ran")

    # internals

    def _invoke(self) -> Any:
        self.run_button.disabled = True
        self._set_status(badge("running", "info") + esc(clipped(self.capability_id)))
        self._sent = self.form.value()
        try:
            inv = self.host.invoke(self.capability_id, self._sent, approve=False,
                                   staged=self.staged)  # fmt: skip
        except ApprovalRequired as exc:
            self._ask_approval(exc.reasons or [exc.message])
            return None
        except ModuleHostError as exc:
            self._refused(exc)
            self._ended(exc)
            return None
        finally:
            self.run_button.disabled = False
        self.invocation = inv
        self._remember(inv)
        self.live = None
        self.result = InvocationView(inv)
        self.result_box.children = (self.result,)
        self.state = "ran"
        self._ran_status(inv, "" if self.result.status == "ok" else self.result.status)
        self._ran(inv)
        return inv

    def _start(self) -> None:
        """Start a :class:`LiveRun` below the form; :meth:`_finished` takes its outcome."""
        self.run_button.disabled = True
        self.state = "running"
        self._set_status("")  # the run below shows its own state and time
        self.invocation = None
        self.result = None
        self._settled.clear()
        self._sent = self.form.value()
        self.live = LiveRun(
            self.host, self.capability_id, self._sent, staged=self.staged,
            start=False, on_done=self._finished, capability=self.capability,
        )  # fmt: skip
        self.result_box.children = (self.live,)
        self.live.start()

    def _finished(self, live: LiveRun) -> None:
        """The run's end (its worker thread): :attr:`live` is never replaced while it is
        out (:meth:`_running`), so this is always the form's own run."""
        try:
            self._take_outcome(live)
        finally:
            self._settled.set()

    def _take_outcome(self, live: LiveRun) -> None:
        self.run_button.disabled = False
        error = live.error
        if isinstance(error, ApprovalRequired):
            self._ask_approval(error.reasons or [error.message])
        elif live.invocation is None:
            self._not_returned(live)
        else:
            self._returned(live)

    def _not_returned(self, live: LiveRun) -> None:
        """The run ended without an invocation: cancelled, failed or refused."""
        error = live.error
        self.state = live.state if live.state in ("cancelled", "failed") else "refused"
        self.error = error if self.state != "cancelled" else None  # the run says cancelled
        self._ended(error, cancelled=self.state == "cancelled")
        if self.state == "cancelled":  # the user's own click: said plainly, no alarm
            self._set_status(badge("cancelled by you", "muted") + "the run was stopped")
            return
        code = error.code if error is not None else live.state
        said = "the module ran and failed" if self.state == "failed" else "nothing ran"
        self._set_status(badge(f"{self.state}: {code}", "error" if error else "muted")
                         + said)  # fmt: skip

    def _returned(self, live: LiveRun) -> None:
        """The run returned; a long-running job's polling may have ended early."""
        self.invocation = live.last
        self._remember(live.invocation, live.last)
        self.result = live.view
        self.state = "ran"
        if live.state in _POLLING_ENDS:  # the job was started and may still run
            self._set_status(badge(_POLLING_ENDS[live.state], "warn")
                             + "the job may still be running: its last poll is shown")  # fmt: skip
        elif live.error is not None:  # the host refused a poll or cut it short
            why = f"polling the job failed: {said(live.error.message)}"
            self._set_status(badge(f"failed: {live.error.code}", "error") + esc(why))
        else:
            self._ran_status(live.last, live.state)
        self._ran(live.invocation, live.last, ended=live.state, error=live.error)

    def _ran(self, first: Any, last: Any = None, *, ended: str = "",
             error: ModuleHostError | None = None) -> None:  # fmt: skip
        """A run that returned: ``ok``, ``failed`` (a result or a poll not ok, or the host
        refused a poll), or how its polling ended (``stopped``, ``cancelled``)."""
        invocations = (first,) if last is None or last is first else (first, last)
        if ended in _POLLING_ENDS:
            status = ended
        else:
            status = "ok" if error is None and all(i.ok for i in invocations) else "failed"
        self._report(invocations, status, error)

    def _ended(self, error: ModuleHostError | None, *, cancelled: bool = False) -> None:
        """A sent run that returned no invocation: cancelled, failed (the module ran: the
        error holds its record) or refused by the host (nothing ran)."""
        record = getattr(error, "invocation", None)
        status = "cancelled" if cancelled else "failed" if record is not None else "refused"
        self._report((record,) if record is not None else (), status, error)

    def _report(self, invocations: tuple[Any, ...], status: str,
                error: ModuleHostError | None) -> None:  # fmt: skip
        self.ran, self.ran_input, self.ran_status = invocations, self._sent, status
        self.ran_error = error
        if self.on_ran is not None:
            self.on_ran(self)

    def _clear_result(self) -> None:
        """Forget the last run's outcome (a finished run: one still out is never cleared)."""
        self.result_box.children = ()
        self.invocation = None
        self.result = None
        self.live = None

    def _ran_status(self, inv: Any, said: str) -> None:
        """``ran`` in the outcome's tone: ok, with warnings (``Invocation.problems``), an
        error."""
        tone = "error" if not inv.ok else "warn" if problems_of(inv) else "ok"
        self._set_status(badge("ran", tone) + esc(said))

    def _remember(self, *invocations: Any) -> None:
        """Add what the runs produced (verified) to the session's artifacts."""
        known = {a.digest for a in self.artifacts}
        for inv in invocations:
            for artifact in getattr(inv, "artifacts", None) or ():
                if artifact.digest not in known:
                    known.add(artifact.digest)
                    self.artifacts.append(artifact)

    def _refused(self, exc: ModuleHostError) -> None:
        """The host raised: ``refused`` when nothing ran, ``failed`` when the module ran
        (the error carries its record: a crash, a broken envelope, a deadline)."""
        self.error = exc
        self.state = "refused" if getattr(exc, "invocation", None) is None else "failed"
        how = "nothing ran: " if self.state == "refused" else "the module ran and failed: "
        self._set_status(badge(f"{self.state}: {exc.code}", "error") + esc(how + said(exc.message)))

    def _ask_approval(self, reasons: list[str]) -> None:
        self.approval_reasons = list(reasons)
        self.state = "needs_approval"
        items = "".join(f"<li>{esc(said(r))}</li>" for r in reasons)
        self.approval_text.value = (
            f"<div><b>Approval needed to run {esc(clipped(self.capability_id))}</b>"
            f"<ul>{items}</ul></div>"
        )
        self.approval_panel.children = (
            self.approval_text,
            w.HBox([self.approve_button, self.cancel_button]),
        )
        self._set_status(badge("waiting for approval", "warn"))

    def _hide_approval(self) -> None:
        self.approval_reasons = []
        self.approval_panel.children = ()

    def _set_status(self, html: str) -> None:
        self.status.value = f"<div>{html}</div>"

    def _refresh(self) -> None:
        shown = self.visible_errors()
        for key, field in self._fields.items():
            message = shown.get(key)
            field.error.value = error_html(message)
        for key, picker in self.files.items():
            found = [shown[k] for k in (key, f"{key}.root", f"{key}.path") if k in shown]
            message = picker.error or ("choose a file or upload one" if found else None)
            picker.error_view.value = error_html(message)
        whole = shown.get("")
        if self.state == "invalid":
            count = len(shown)
            extra = f": {esc(whole)}" if whole else ""
            self._set_status(badge("not run", "error") + f"{count} field(s) need attention{extra}")
        elif self.state == "editing":
            self._set_status(badge("input error", "error") + esc(whole) if whole else "")

    def _field_line(self, spec: FieldSpec, value: Any, shown: Mapping[str, str]) -> str:
        """One field of :meth:`text`: label, kind, current value, error; ``""`` to skip."""
        indent = "  " * len(spec.path)
        error = f"  ✗ {clipped(shown[spec.key], TEXT_VALUE_CHARS)}" if spec.key in shown else ""
        if spec.path[:-1] and ".".join(spec.path[:-1]) in self.files:
            return ""  # root and path of a file input: the file line says it
        if spec.key in self.files:
            picker = self.files[spec.key]
            chosen = _json(picker.staged.ref()) if picker.staged is not None else ""
            if picker.error:  # the picker's own says why (a chosen file that is gone)
                error = f"  ✗ {clipped(picker.error, TEXT_VALUE_CHARS)}"
            return f"{indent}{clipped(spec.label)} (file) = {chosen}{error}"
        if spec.kind == "object":
            return f"{indent}{clipped(spec.label)}:"
        current = value
        for part in spec.path:
            current = current.get(part, UNSET) if isinstance(current, dict) else UNSET
        if current is not UNSET:
            shown_value = _json(current)
        else:  # unset, or typed but unreadable: show what was typed
            raw = self.form.raw(spec.key)
            shown_value = clipped(raw, TEXT_VALUE_CHARS) if isinstance(raw, str) else ""
        return f"{indent}{clipped(spec.label)} ({spec.kind}) = {shown_value}{error}"

    def text(self) -> str:
        lines = [f"CapabilityForm {clipped(self.capability_id)}: {self.state}"]
        if self.capability.skills:
            lines.append(f"  skills: {', '.join(self._skill_labels())}")
        if self.skills is not None:
            lines.extend(f"  {line}" for line in self.skills.summary().splitlines())
        shown = self.visible_errors()
        value = self.form.value()
        lines.extend(
            line for spec in self.form.fields if (line := self._field_line(spec, value, shown))
        )
        if "" in shown:
            lines.append(f"  ✗ {shown['']}")
        if self.approval_reasons:
            lines.append("  approval needed:")
            lines.extend(f"    - {said(r)}" for r in self.approval_reasons)
        if self.error is not None:
            how = "failed" if self.state == "failed" else "refused"
            lines.append(f"  {how} {self.error.code}: {said(self.error.message)}")
        if self.live is not None:
            lines.extend(f"  {line}" for line in self.live.text().splitlines())
        elif self.result is not None:
            lines.extend(f"  {line}" for line in self.result.text().splitlines())
        return "\n".join(lines)

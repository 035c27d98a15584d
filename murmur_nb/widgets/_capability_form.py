"""A form generated from a capability's request schema, with approval, then the result.

The checks live in :class:`murmur_nb._modules.schema_form.SchemaForm`; this widget only mirrors
each input widget into it and shows its verdict beside the field. A field's "required"
mark turns into an error only once the field was touched or a run was attempted, so a
fresh form is not a wall of red.

Running is three plain calls on the host: :meth:`ModuleHost.approval_reasons` (empty: go),
:meth:`ModuleHost.approve` when the operator clicks Approve, and :meth:`ModuleHost.invoke`.
An :class:`~murmur_nb.ApprovalRequired` raised by ``invoke`` (the descriptor changed between
the check and the run) brings the approval panel back with the host's reasons.

The header lists the skills the capability names, with their declared token estimates;
"Show skills" is one call, :meth:`ModuleHost.skills_for`, and shows what it loaded (verified,
through the Markdown primitive) and what it left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import ipywidgets as w

from murmur_nb._exceptions import ApprovalRequired, ModuleHostError
from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.schema_form import UNSET, FieldSpec, SchemaForm
from murmur_nb.widgets._html import TextView, badge, bundle_of, effect_badges, esc
from murmur_nb.widgets._invocation_view import InvocationView

__all__ = ["CapabilityForm"]

_NOT_SET = "— not set —"


def _option_label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _flatten(
    values: Mapping[str, Any], form: SchemaForm, prefix: str = ""
) -> Iterator[tuple[str, Any]]:
    """``(dotted key, raw)`` pairs; a mapping given for an object field is descended into."""
    for name, raw in values.items():
        key = f"{prefix}{name}"
        spec = form.field(key)
        if spec.kind == "object" and isinstance(raw, Mapping):
            yield from _flatten(raw, form, f"{key}.")
        else:
            yield key, raw


class _Field:
    """One input widget bound to one field of the schema form."""

    def __init__(self, spec: FieldSpec, form: SchemaForm) -> None:
        self.spec = spec
        raw = form.raw(spec.key)
        desc = w.Layout(width="auto")
        self.widget: w.Widget
        if spec.kind == "boolean" and isinstance(raw, bool):  # a default: a checkbox
            self.widget = w.Checkbox(value=bool(raw), indent=False, layout=desc)
        elif spec.kind == "boolean":
            self.widget = w.Dropdown(options=[(_NOT_SET, -1), ("true", 1), ("false", 0)], value=-1)
        elif spec.kind == "enum":
            options = [(_NOT_SET, -1)] + [(_option_label(v), i) for i, v in enumerate(spec.options)]
            index = self._index_of(raw)
            self.widget = w.Dropdown(options=options, value=index)
        elif spec.kind == "array" and spec.item_kind == "enum":
            options = [(_option_label(v), i) for i, v in enumerate(spec.options)]
            chosen = tuple(i for i, v in enumerate(spec.options) if v in tuple(raw))
            self.widget = w.SelectMultiple(options=options, value=chosen, rows=min(6, len(options)))
        elif spec.kind in ("array", "json"):
            hint = "one item per line" if spec.kind == "array" else "JSON"
            self.widget = w.Textarea(value=str(raw), placeholder=hint, rows=3)
        elif spec.kind == "string" and int(spec.schema.get("maxLength", 0) or 0) > 200:
            self.widget = w.Textarea(value=str(raw), rows=3)
        else:
            placeholder = {"number": "number", "integer": "whole number"}.get(spec.kind, "")
            self.widget = w.Text(value=str(raw), placeholder=placeholder)
        self.error = w.HTML()
        help_text = " — ".join(x for x in (spec.description, spec.hint) if x)
        label = w.HTML(
            f"<b>{esc(spec.title)}</b>"
            + (' <span style="color:#a50e0e">*</span>' if spec.required else "")
        )
        label.layout.width = "160px"
        row = w.HBox([label, self.widget, self.error])
        self.box = w.VBox(
            [row, w.HTML(f'<small style="color:#5f6368">{esc(help_text)}</small>')]
            if help_text
            else [row]
        )

    def _index_of(self, raw: Any) -> int:
        for i, v in enumerate(self.spec.options):
            if raw is not UNSET and v == raw and type(v) is type(raw):
                return i
        return -1

    def raw(self) -> Any:
        """The widget's value in the form's raw vocabulary."""
        value = self.widget.value
        spec = self.spec
        if spec.kind == "boolean":
            if isinstance(self.widget, w.Checkbox):
                return bool(value)
            return UNSET if value == -1 else bool(value)
        if spec.kind == "enum":
            return UNSET if value == -1 else spec.options[value]
        if spec.kind == "array" and spec.item_kind == "enum":
            return tuple(spec.options[i] for i in value)
        return value

    def show(self, raw: Any) -> None:
        """Put a raw value into the widget (the inverse of :meth:`raw`)."""
        spec = self.spec
        if spec.kind == "boolean":
            if isinstance(self.widget, w.Checkbox):
                self.widget.value = bool(raw)
            else:
                self.widget.value = -1 if raw is UNSET or raw is None else int(bool(raw))
        elif spec.kind == "enum":
            index = self._index_of(raw)
            if index == -1 and raw is not UNSET:
                raise ValueError(f"{raw!r} is not one of the choices for {spec.key!r}")
            self.widget.value = index
        elif spec.kind == "array" and spec.item_kind == "enum":
            values = list(raw)
            bad = [v for v in values if v not in spec.options]
            if bad:
                raise ValueError(f"{bad[0]!r} is not one of the choices for {spec.key!r}")
            self.widget.value = tuple(i for i, v in enumerate(spec.options) if v in values)
        elif isinstance(raw, list | tuple) and spec.kind == "array":
            self.widget.value = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in raw)
        elif spec.kind == "json" and not isinstance(raw, str):
            self.widget.value = json.dumps(raw)
        else:
            self.widget.value = "" if raw is UNSET or raw is None else str(raw)


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
        key (``{"image.path": "..."}``); fields not named keep their schema default.
    staged : sequence of StagedArtifact, optional
        Artifacts staged with ``host.stage`` to hand to the module (``invoke(staged=...)``).

    Attributes
    ----------
    form : SchemaForm
        The headless form: values, coercion and errors.
    inputs : dict
        Field key -> the input widget (set ``.value`` to fill it).
    run_button, approve_button, cancel_button : ipywidgets.Button
    state : str
        ``editing``, ``invalid``, ``needs_approval``, ``cancelled``, ``ran`` or ``refused``.
    approval_reasons : list of str
        The reasons shown in the approval panel (empty when it is hidden).
    invocation
        The last invocation, or ``None``.
    result : InvocationView or None
        The view of the last invocation.
    poll_button : ipywidgets.Button
        Shown after a long-running capability ran: opens :attr:`poll_form`.
    poll_form : CapabilityForm or None
        The form of the poll capability, filled from the result where names match.
    skills_button : ipywidgets.Button
        Shown when the capability lists skills: loads them with ``host.skills_for``.
    skills : SkillSelection or None
        What "Show skills" loaded, shown in ``skills_box``.
    """

    def __init__(
        self,
        host: ModuleHost,
        capability_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        staged: Sequence[Any] = (),
    ) -> None:
        self.host = host
        self.capability_id = capability_id
        self.staged = list(staged)
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

        self._fields: dict[str, _Field] = {}
        body = self._build(self.form.root)
        self.inputs: dict[str, w.Widget] = {k: f.widget for k, f in self._fields.items()}

        cap = self.capability
        effects = cap.effects
        heading = (
            f"<h4 style='margin:4px 0'>{esc(cap.title or cap.id)} <code>{esc(cap.id)}</code></h4>"
        )
        summary = f"<div>{esc(cap.summary)}</div>" if cap.summary else ""
        self.skills: Any = None
        self.skills_button = w.Button(description="Show skills", icon="book")
        self.skills_box = w.VBox()
        self.skills_button.on_click(lambda _b: self.show_skills())
        self.header = w.HTML(heading + summary + effect_badges(effects) + self._skills_html())
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.reset_button = w.Button(description="Reset", tooltip="back to the defaults")
        self.approve_button = w.Button(description="Approve", button_style="warning")
        self.cancel_button = w.Button(description="Cancel")
        self.status = w.HTML()
        self.approval_text = w.HTML()
        self.approval_panel = w.VBox()
        self.result_box = w.VBox()
        self.poll_form: CapabilityForm | None = None
        self.poll_button = w.Button(description="Poll", icon="refresh")
        self.poll_box = w.VBox()
        self.poll_button.on_click(lambda _b: self.open_poll())
        self.run_button.on_click(lambda _b: self.run())
        self.reset_button.on_click(lambda _b: self.reset())
        self.approve_button.on_click(lambda _b: self.approve())
        self.cancel_button.on_click(lambda _b: self.cancel())
        super().__init__(
            [
                self.header,
                *([self.skills_button, self.skills_box] if cap.skills else []),
                body,
                w.HBox([self.run_button, self.reset_button]),
                self.approval_panel,
                self.status,
                self.result_box,
            ]
        )
        for key, raw in _flatten(values or {}, self.form):
            self.set_value(key, raw)
        self._touched.clear()
        self._refresh()

    # layout

    def _skill_labels(self) -> list[str]:
        """``"<id> (<tokens> tokens)"`` per skill the capability lists (unknown ids marked)."""
        declared = {s.id: s for s in self.descriptor.skills or ()}
        return [
            f"{sid} ({declared[sid].tokens} tokens)" if sid in declared else f"{sid} (unknown)"
            for sid in self.capability.skills or ()
        ]

    def _skills_html(self) -> str:
        declared = {s.id: s for s in self.descriptor.skills or ()}
        items = "".join(
            f"<li><code>{esc(sid)}</code> {esc(declared[sid].title)} · "
            f"{declared[sid].tokens} tokens</li>"
            if sid in declared
            else f"<li><code>{esc(sid)}</code> {badge('unknown skill', 'warn')}</li>"
            for sid in self.capability.skills or ()
        )
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
        if spec.kind == "object":
            kids = [self._build(child) for child in spec.children]
            if not spec.path:
                return w.VBox(kids)
            mark = ' <span style="color:#a50e0e">*</span>' if spec.required else ""
            desc = f" <small>{esc(spec.description)}</small>" if spec.description else ""
            box = w.VBox(kids)
            box.layout.margin = "0 0 0 16px"
            return w.VBox([w.HTML(f"<b>{esc(spec.title)}</b>{mark}{desc}"), box])
        field = _Field(spec, self.form)
        self._fields[spec.key] = field

        def changed(_change: Any, key: str = spec.key) -> None:
            self._touched.add(key)
            self.form.set(key, self._fields[key].raw())
            if self.state in ("invalid", "cancelled"):
                self.state = "editing"
            self._refresh()

        field.widget.observe(changed, names="value")
        return field.box

    # plain calls

    def set_value(self, key: str, raw: Any) -> None:
        """Fill field ``key`` as a person would (text for numbers, the option for enums)."""
        try:
            field = self._fields[key]
        except KeyError:
            self.form.field(key)  # raises the helpful KeyError
            raise
        field.show(raw)

    def visible_errors(self) -> dict[str, str]:
        """The errors shown beside fields now (``required`` only once touched or run)."""
        errors = self.form.errors()
        return {
            k: v
            for k, v in errors.items()
            if self._attempted or k in self._touched or v != "required"
        }

    def reset(self) -> None:
        """Defaults back in every field; errors and result cleared."""
        self.form.reset()
        for key, field in self._fields.items():
            field.show(self.form.raw(key))
        self._touched.clear()
        self._attempted = False
        self.state = "editing"
        self._hide_approval()
        self.result_box.children = ()
        self.invocation = None
        self.result = None
        self._refresh()

    def run(self) -> Any:
        """Validate, ask for approval when needed, else invoke; returns the invocation or None."""
        self._attempted = True
        self.error = None
        errors = self.form.errors()
        if errors:
            self.state = "invalid"
            self._refresh()
            return None
        reasons = list(self.host.approval_reasons(self.capability_id))
        if reasons:
            self._ask_approval(reasons)
            return None
        return self._invoke()

    def approve(self) -> Any:
        """The operator approves: record it with the host and run."""
        if self.state != "needs_approval":
            return None
        self._hide_approval()
        try:
            self.host.approve(self.capability_id)
        except ModuleHostError as exc:
            self._refused(exc)
            return None
        return self._invoke()

    def cancel(self) -> None:
        """The operator declines: nothing runs."""
        self._hide_approval()
        self.state = "cancelled"
        self._set_status(badge("cancelled", "muted") + "nothing ran")

    # internals

    def _invoke(self) -> Any:
        self.run_button.disabled = True
        self._set_status(badge("running", "info") + esc(self.capability_id))
        try:
            inv = self.host.invoke(
                self.capability_id, self.form.value(), approve=False, staged=self.staged
            )
        except ApprovalRequired as exc:
            self._ask_approval(exc.reasons or [exc.message])
            return None
        except ModuleHostError as exc:
            self._refused(exc)
            return None
        finally:
            self.run_button.disabled = False
        self.invocation = inv
        self.result = InvocationView(inv)
        self.poll_form = None
        self.result_box.children = (self.result, *self._poll_controls(inv))
        self.state = "ran"
        tone = "ok" if inv.ok else "error"
        self._set_status(badge("ran", tone) + ("" if inv.ok else esc(self.result.status)))
        return inv

    def _refused(self, exc: ModuleHostError) -> None:
        self.error = exc
        self.state = "refused"
        self._set_status(badge(f"refused: {exc.code}", "error") + esc(exc.message))

    def _poll_controls(self, inv: Any) -> list[w.Widget]:
        """For a long-running capability: a button opening its poll capability's form."""
        poll = self.capability.poll_capability
        if not (self.capability.long_running and poll and inv.ok):
            return []
        self.poll_button.description = f"Poll {poll}"
        return [self.poll_button, self.poll_box]

    def open_poll(self) -> CapabilityForm | None:
        """Open the poll capability's form, filled from this run's result where names match.

        A long-running capability returns something that identifies the job (a job id,
        say); whichever of the result's keys the poll capability's request schema also
        has are carried over.
        """
        poll = self.capability.poll_capability
        if self.invocation is None or not poll:
            return None
        result = self.invocation.result if isinstance(self.invocation.result, dict) else {}
        form = CapabilityForm(self.host, poll)
        names = {c.path[-1] for c in form.form.root.children}
        for key in names & set(result):
            form.set_value(key, result[key])
        form._touched.clear()
        self.poll_form = form
        self.poll_box.children = (form,)
        return form

    def _ask_approval(self, reasons: list[str]) -> None:
        self.approval_reasons = list(reasons)
        self.state = "needs_approval"
        items = "".join(f"<li>{esc(r)}</li>" for r in reasons)
        self.approval_text.value = (
            f"<div><b>Approval needed to run {esc(self.capability_id)}</b><ul>{items}</ul></div>"
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
            field.error.value = (
                f'<span style="color:#a50e0e">✗ {esc(message)}</span>' if message else ""
            )
        whole = shown.get("")
        if self.state == "invalid":
            count = len(shown)
            extra = f": {esc(whole)}" if whole else ""
            self._set_status(badge("not run", "error") + f"{count} field(s) need attention{extra}")
        elif self.state == "editing":
            self._set_status(badge("input error", "error") + esc(whole) if whole else "")

    def text(self) -> str:
        lines = [f"CapabilityForm {self.capability_id}: {self.state}"]
        if self.capability.skills:
            lines.append(f"  skills: {', '.join(self._skill_labels())}")
        if self.skills is not None:
            lines.extend(f"  {line}" for line in self.skills.summary().splitlines())
        shown = self.visible_errors()
        value = self.form.value()
        for spec in self.form.fields:
            indent = "  " * len(spec.path)
            if spec.kind == "object":
                lines.append(f"{indent}{spec.label}:")
                continue
            current = value
            for part in spec.path:
                current = current.get(part, UNSET) if isinstance(current, dict) else UNSET
            if current is not UNSET:
                shown_value = json.dumps(current)
            else:  # unset, or typed but unreadable: show what was typed
                raw = self.form.raw(spec.key)
                shown_value = raw if isinstance(raw, str) else ""
            error = f"  ✗ {shown[spec.key]}" if spec.key in shown else ""
            lines.append(f"{indent}{spec.label} ({spec.kind}) = {shown_value}{error}")
        if "" in shown:
            lines.append(f"  ✗ {shown['']}")
        if self.approval_reasons:
            lines.append("  approval needed:")
            lines.extend(f"    - {r}" for r in self.approval_reasons)
        if self.error is not None:
            lines.append(f"  refused {self.error.code}: {self.error.message}")
        if self.result is not None:
            lines.extend(f"  {line}" for line in self.result.text().splitlines())
        if self.poll_form is not None:
            lines.extend(f"  {line}" for line in self.poll_form.text().splitlines())
        return "\n".join(lines)

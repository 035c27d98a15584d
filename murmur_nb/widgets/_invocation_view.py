"""One invocation at a glance: outcome, result, warnings, execution, cost, artifacts inline.

The result is a collapsible JSON tree (``<details>``, so it folds without a kernel too) with a
progress bar above it when it reports ``done``/``total``. A ``slides`` artifact is shown once,
by its :class:`SlideStepper`, not also as a static strip.

A run the host cut short (a deadline, a crash, a broken envelope) raised a host error that
carries the run's record; given that error, the view shows the record under the error's code
and message, which the record itself does not hold.

What the module wrote is shown as its card shows it (:mod:`murmur_nb._render.card`): each
message cut, at most a few rows of warnings and rejected artifacts with a line counting the
rest; the result tree is bounded too (:func:`~murmur_nb.widgets._html.json_tree`). The
Invocation keeps it all whole.

Cost follows the protocol to the letter: ``None`` is *unknown* and is never shown as free;
``0`` is *free*. The duration is shown live but kept out of ``text/plain`` and the static
HTML, which nbval compares and which therefore must not change from run to run.
"""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as w

from murmur_nb._exceptions import MurmurError
from murmur_nb._render.card import (
    evidence_html,
    problems_of,
    rejected_rows,
    said,
    shown_warnings,
    shows_evidence,
    state_label,
)
from murmur_nb._render.render import render as render_invocation
from murmur_nb._rules import clipped
from murmur_nb.widgets._html import (
    TextView,
    badge,
    esc,
    json_tree,
    lines_html,
    progress_html,
    progress_of,
    require,
    set_output,
    volatile,
)
from murmur_nb.widgets._slides import SlideStepper

__all__ = ["InvocationView", "format_cost"]


def format_cost(cost: float | None) -> str:
    """``None`` -> ``unknown``, ``0`` -> ``free``, otherwise the number."""
    if cost is None:
        return "unknown"
    if cost == 0:
        return "free"
    return f"{cost:g}"


#: Characters of the result's one line of JSON in ``text/plain`` before its ``…`` (300 at
#: most, as before it was cut by the one rule, :func:`~murmur_nb._rules.clipped`).
RESULT_LINE_CHARS = 299


def short_json(value: object, chars: int = RESULT_LINE_CHARS) -> str:
    """``value`` as one line of readable JSON (non-ASCII kept), cut after ``chars``."""
    return clipped(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str), chars)


def _capability_of(inv: Any) -> str:
    for attr in ("capability", "capability_id"):
        value = getattr(inv, attr, None)
        if isinstance(value, str) and value:
            return value
    request = getattr(inv, "request", None)
    return str(getattr(request, "capability", "") or "")


def _execution_words(execution: Any) -> list[str]:
    if execution is None:
        return ["execution: not reported"]
    where = [
        name.replace("_", " ")
        for name in ("local", "network", "external_writes")
        if getattr(execution, name, False)
    ]
    provider = getattr(execution, "provider", "") or ""
    if provider:
        where.append(f"provider {provider}")
    return [
        "ran: " + (", ".join(where) if where else "nothing declared"),
        f"estimated cost: {format_cost(getattr(execution, 'estimated_cost', None))}",
        f"actual cost: {format_cost(getattr(execution, 'actual_cost', None))}",
    ]


class InvocationView(TextView):
    """Show an :class:`~murmur_nb.Invocation`: status, errors, execution and artifacts.

    Parameters
    ----------
    inv
        The invocation returned by ``host.invoke``.
    render : bool
        Render the verified artifacts inline with :func:`murmur_nb.render` (default).
    progress : bool
        Draw a ``done``/``total`` result as a progress bar (a :class:`LiveRun` draws its
        own, live, and passes ``False``).
    error : ModuleHostError, optional
        The host's error when ``inv`` is the record it carries (the module ran out of
        time, crashed or broke its envelope): its code is the status shown, with its
        message.

    Attributes
    ----------
    invocation
        The invocation shown.
    error : ModuleHostError or None
        The host's error the invocation is the record of.
    rendering
        What :func:`murmur_nb.render` returned for it, or ``None``.
    steppers : list
        One slide stepper per ``slides`` artifact.
    artifacts : ipywidgets.Output
        The rendered artifacts.
    """

    def __init__(
        self, inv: Any, *, render: bool = True, progress: bool = True, error: Any = None
    ) -> None:
        require(inv, "artifacts", "InvocationView", "the Invocation that host.invoke(...) returns")
        self.invocation = inv
        self.error = error
        self.show_progress = progress
        self.rendering: Any = None
        self.rendered_inline = render
        self.steppers: list[SlideStepper] = []
        self.header = w.HTML(self._header_html())
        self.details = w.HTML(self._details_html())
        self.artifacts = w.Output()
        children: list[w.Widget] = [self.header, self.details]
        produced = list(getattr(inv, "artifacts", None) or ()) + list(
            getattr(inv, "rejected_artifacts", None) or ()
        )
        self.render_error: MurmurError | None = None
        if render and produced:
            try:
                self.rendering = render_invocation(inv)
            except MurmurError as exc:  # e.g. a missing optional renderer: say so, go on
                self.render_error = exc
                self.details.value += (
                    f"<div>{badge(f'not rendered: {exc.code}', 'error')}{esc(exc)}</div>"
                )
        if self.rendering is not None:
            parts = self._parts(self.rendering)
            stills = [p for p in parts if not getattr(p, "slides", ())]
            set_output(self.artifacts, *(stills if len(stills) < len(parts) else [self.rendering]))
            for part in parts:
                if getattr(part, "slides", ()):
                    title = part.text.splitlines()[0] if part.text else ""
                    self.steppers.append(SlideStepper(part.slides, title=title))
            children.append(self.artifacts)
            children.extend(self.steppers)
        super().__init__(children)

    @staticmethod
    def _parts(rendering: Any) -> list[Any]:
        parts = list(getattr(rendering, "parts", ()) or ())
        return parts or [rendering]

    # what is shown

    @property
    def status(self) -> str:
        """``ok``, ``warning`` (``Invocation.problems``: a result that breaks its
        ``result_schema``, a rejected artifact, a bad exit after the envelope) or the error
        code (the host's, when it cut the run short), cut to a label's length (a module's
        code is its own words: :func:`~murmur_nb._rules.clipped`)."""
        inv = self.invocation
        if inv.ok and self.error is None:
            return "warning" if problems_of(inv) else "ok"
        error = self.error if self.error is not None else getattr(inv, "error", None)
        return clipped(str(getattr(error, "code", "") or "error"))

    def _errors(self) -> list[Any]:
        """The host's error (if given), then the module's own (if it said one)."""
        found = [self.error, getattr(self.invocation, "error", None)]
        return [e for e in found if e is not None]

    def _header_html(self) -> str:
        inv = self.invocation
        cap = _capability_of(inv)
        tone = {"ok": "ok", "warning": "warn"}.get(self.status, "error")
        label = state_label(inv)
        if self.error is not None:  # the host's code; a run cancelled by its user: no alarm
            cancelled = self.status == "cancelled"
            label = "cancelled" if cancelled else f"error: {self.status}"
            tone = "muted" if cancelled else tone
        state = badge(label, tone)
        duration = getattr(inv, "duration_ms", None)
        took = f" {volatile(badge(f'{duration:.0f} ms', 'muted'))}" if duration is not None else ""
        return f"<div><b>{esc(cap)}</b> {state}{took}</div>"

    def _details_html(self) -> str:
        inv = self.invocation
        lines: list[str] = []
        for error in self._errors():
            retry = " (retryable)" if getattr(error, "retryable", False) else ""
            lines.append(
                f"<b>{esc(clipped(error.code))}</b>{esc(retry)}: "
                f"{esc(said(getattr(error, 'message', '')))}"
            )
        problem = getattr(inv, "result_problem", "")
        problems = problems_of(inv)
        for told in problems:
            tag = "result breaks its schema" if told == problem else "warning"
            lines.append(badge(tag, "warn") + esc(told))
        result = getattr(inv, "result", None)
        if inv.ok:
            progress = progress_of(result)
            if progress is not None and self.show_progress:
                lines.append(progress_html(*progress))
            lines.append('<div class="murmur-result"><b>result</b>' + json_tree(result) + "</div>")
        lines.extend(badge("warning", "warn") + esc(warning) for warning in shown_warnings(inv))
        if shows_evidence(inv):
            lines.append(evidence_html(inv.evidence))
        execution = getattr(inv, "execution", None)
        lines.extend(esc(x) for x in _execution_words(execution))
        approval = getattr(inv, "approval", None)
        if approval:
            lines.append(f"approval: {esc(approval)}")
        confinement = getattr(inv, "confinement", "")
        if confinement:
            lines.append(f"confinement: {esc(confinement)}")
        # a rendering shows each rejected artifact as its error card: said once, there
        for aid, code, message in () if self.rendered_inline else rejected_rows(inv):
            lines.append(
                badge("rejected", "error")
                + f"artifact {esc(aid)}: {esc(code)}"
                + (f" — {esc(message)}" if message else "")
                if code
                else esc(message)
            )
        return lines_html(lines)

    def text(self) -> str:
        inv = self.invocation
        cap = _capability_of(inv)
        out = [f"InvocationView {cap}: {self.status}"]
        out += [
            f"  error {clipped(e.code)}: {said(getattr(e, 'message', ''))}" for e in self._errors()
        ]
        problem = getattr(inv, "result_problem", "")
        problems = problems_of(inv)
        for told in problems:
            out.append(f"  result breaks its schema: {told}" if told == problem
                       else f"  warning: {told}")  # fmt: skip
        if inv.ok:
            progress = progress_of(getattr(inv, "result", None))
            if progress is not None:
                out.append(f"  progress: {progress[0]} of {progress[1]} done")
            out.append(f"  result: {short_json(getattr(inv, 'result', None))}")
        out += [f"  warning: {w}" for w in shown_warnings(inv)]
        if shows_evidence(inv):
            out += [f"  {line}" for line in inv.evidence.lines()]
        out.extend(f"  {x}" for x in _execution_words(getattr(inv, "execution", None)))
        if getattr(inv, "approval", None):
            out.append(f"  approval: {inv.approval}")
        shown = len(getattr(inv, "artifacts", None) or ())
        rejected = len(getattr(inv, "rejected_artifacts", None) or ())
        out.append(f"  artifacts: {shown} verified, {rejected} rejected")
        out.extend(
            f"    rejected {aid}: {code}" if code else f"    {message}"
            for aid, code, message in rejected_rows(inv)
        )
        if self.rendering is not None:
            out.extend(f"    {line}" for line in str(self.rendering.text).splitlines())
        if self.render_error is not None:
            out.append(f"    not rendered {self.render_error.code}: {self.render_error}")
        return "\n".join(out)

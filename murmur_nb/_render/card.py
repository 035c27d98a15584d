"""The compact card an :class:`~murmur_nb.Invocation` or a verified artifact shows as, when it
ends a notebook cell: outcome, result, artifacts, warnings, confinement; evidence on failure.

* **Read through a shape, not the host.** This layer never imports the host; the card reads
  the same attributes :class:`~murmur_nb.widgets.InvocationView` reads (``ok``, ``state``,
  ``error``, ``result``, ``warnings``, ...), with ``getattr`` defaults.
* **Three states, three tones.** ``ok`` (success tone), ``warning`` (a result that breaks its
  ``result_schema``: the warning tone and the problem said once, never a green "ok") and
  ``error``. A tone colours only a border and a badge's frame (:mod:`.theme`), so the text
  keeps the theme's own contrast in light and dark.
* **Nothing that changes from run to run** (no duration, request id or run folder): nbval
  compares what a saved notebook shows.
* **Bounded.** The result is shown as JSON cut at :data:`RESULT_CHARS`, open when it is
  small (:data:`OPEN_LINES`: a click to see ``{"made": 3}`` is a click too many), folded
  otherwise; lists of warnings, artifacts and rejected artifacts at :data:`MAX_ROWS` rows,
  with a "more" line, in the HTML and the text alike; each message a module wrote (a
  warning, its error, why an artifact was rejected) cut at :data:`MESSAGE_CHARS`, each name
  (an id, a path) at a label's length; the "more" line names the attribute that keeps them
  all (``Invocation.rejected_artifacts``). A module's 8 MB warning was 16 MB of every display
  of its call, and 40,000 rejected artifacts 21 MB of HTML. ``render(inv)`` and the
  ``InvocationView`` list and cut by the same rules: :func:`said`, :func:`shown_warnings`,
  :func:`rejected_rows`, :func:`more_rejected`.
* **A module's words are shown, never obeyed.** Its result, warnings and error message reach
  the HTML through :func:`~.core.esc` and the text through :func:`~.core.printable`: a lone
  surrogate is written as its escape (it cannot be encoded, so the cell would fail) and, in
  text, a control sequence as ``\\x1b...`` (it would drive the reader's terminal).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from murmur_nb._files.artifacts import DISPLAY
from murmur_nb._render.core import clipped, esc, format_size, printable, short_digest
from murmur_nb._render.theme import BG_SOFT, BORDER, ERROR, FG, FG_MUTED, OK, WARN

__all__ = [
    "artifact_card",
    "artifact_text",
    "evidence_html",
    "first_rows",
    "invocation_card",
    "invocation_text",
    "more_line",
    "more_listed",
    "more_rejected",
    "problems_of",
    "rejected_rows",
    "said",
    "shown_warnings",
    "shows_evidence",
    "state_label",
]

RESULT_CHARS = 2000
#: A result whose JSON takes at most this many lines is shown open.
OPEN_LINES = 12
#: Rows of one list (warnings, artifacts, rejected artifacts) a display of a call shows.
MAX_ROWS = 12
#: Characters of one message a module wrote (a warning, an error message) a display shows.
MESSAGE_CHARS = 2000
_Item = TypeVar("_Item")
_ALL_ARTIFACTS = "Invocation.artifacts"
_TONES = {"ok": OK, "warning": WARN, "error": ERROR}
_FRAME = (
    "border:1px solid;border-radius:6px;padding:6px 10px;margin:4px 0;max-width:100%;"
    "overflow-wrap:anywhere;font-family:system-ui,-apple-system,'Segoe UI',sans-serif;"
    f"font-size:13px;color:{FG}"
)
_PRE = (
    f"margin:4px 0;padding:4px 6px;background:{BG_SOFT};color:{FG};border-radius:4px;"
    "white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px"
)
#: a result may be long: it scrolls; the evidence is bounded already and its last line (the
#: exception) must be in view, so it never does
_RESULT_PRE = _PRE + ";max-height:18em;overflow:auto"


def _badge(text: str, colour: str) -> str:
    return (
        f'<span class="murmur-badge" style="display:inline-block;border:1px solid;'
        f"border-color:{colour};background:{BG_SOFT};color:{FG};border-radius:3px;"
        f'padding:0 5px;margin-right:6px;font-size:12px">{esc(text)}</span>'
    )


def _state(inv: Any) -> str:
    state = getattr(inv, "state", None)
    if isinstance(state, str):
        return state
    return "ok" if getattr(inv, "ok", False) else "error"


def problems_of(inv: Any) -> list[str]:
    """Why the call is a warning (``Invocation.problems``; a schema problem alone for an
    invocation-like object without them)."""
    problems = getattr(inv, "problems", None)
    if isinstance(problems, list):
        return [str(p) for p in problems]
    problem = getattr(inv, "result_problem", "")
    return [problem] if problem else []


def state_label(inv: Any) -> str:
    """``ok``, ``result breaks its schema``, ``ok, with warnings`` or ``error: <code>`` (the
    module's code, :func:`clipped`: a module chooses it, of any length)."""
    state = _state(inv)
    if state == "warning":
        if getattr(inv, "result_problem", ""):
            return "result breaks its schema"
        return "ok, with warnings"
    if state == "ok":
        return "ok"
    return f"error: {clipped(getattr(getattr(inv, 'error', None), 'code', '') or 'error')}"


def _short_json(value: Any, limit: int = RESULT_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True, default=str)
    return clipped(text, limit - 1)  # ``limit`` characters at most, the ``…`` one of them


def more_line(count: int, whole: str, what: str = "", how: str = "") -> str:
    """The line counting ``count`` items a display leaves out, naming ``whole``, the
    attribute that keeps them all (``"… and 3 more rejected (Invocation.rejected_artifacts
    keeps them all)"``), then ``how`` to see them, if said."""
    return f"… and {count} more{what} ({whole} keeps them all{how})"


def more_rejected(count: int) -> str:
    """The line counting ``count`` rejected artifacts of an invocation a display leaves out
    (:func:`more_listed` counts those of a list given to ``render``)."""
    return more_line(count, "Invocation.rejected_artifacts", " rejected")


def more_listed(count: int, what: str, start: int, step: int) -> str:
    """The line counting ``count`` items of a list given to ``render`` that it does not
    draw (``what``: ``" rejected"``, ``" invocations"``), naming the slice from ``start``,
    the first left out, that draws ``step`` more."""
    how = f"; render a slice of it, such as [{start}:{start + step}], to draw others"
    return more_line(count, "the list given to render()", what, how)


def first_rows(items: Sequence[_Item], show: Callable[[_Item], str], whole: str) -> list[str]:
    """The first :data:`MAX_ROWS` of ``items``, each shown, then a :func:`more_line` for the
    rest naming ``whole``, what keeps them all; only the rows listed are shown (``show`` may
    cut a long message). Every list a view draws from what a module declared or a host
    reported is bounded by it (a card's warnings, a browser's descriptor problems)."""
    rows = [show(item) for item in items[:MAX_ROWS]]
    if len(items) > MAX_ROWS:
        rows.append(more_line(len(items) - MAX_ROWS, whole))
    return rows


def said(text: str) -> str:
    """A message a module wrote, cut at :data:`MESSAGE_CHARS`."""
    return clipped(text, MESSAGE_CHARS)


def shown_warnings(inv: Any) -> list[str]:
    """The warnings a display lists: without the problems the state already says, at
    :data:`MAX_ROWS` rows (a :func:`more_line` counts the rest), each cut (:func:`said`)."""
    problems = problems_of(inv)
    warnings = [w for w in getattr(inv, "warnings", None) or () if w not in problems]
    return first_rows(warnings, said, "Invocation.warnings")


def _artifact_line(artifact: Any) -> str:
    return (
        f"{clipped(artifact.id)} · {clipped(artifact.media_type)} · "
        f"{format_size(artifact.bytes)} · {clipped(artifact.root)}:{clipped(artifact.path)} · "
        f"{short_digest(artifact.digest)}"
    )


def _artifact_text_line(artifact: Any) -> str:
    return f"artifact {_artifact_line(artifact)}"


def rejected_rows(inv: Any) -> list[tuple[str, str, str]]:
    """``(id, code, message)`` of the rejected artifacts, each cut, at :data:`MAX_ROWS`
    rows; a last ``("", "", more_rejected(...))`` counts the others."""
    rejected = list(getattr(inv, "rejected_artifacts", None) or ())
    rows = [(clipped(r.id), clipped(r.code), said(r.message)) for r in rejected[:MAX_ROWS]]
    if len(rejected) > MAX_ROWS:
        rows.append(("", "", more_rejected(len(rejected) - MAX_ROWS)))
    return rows


def _outcome_lines(inv: Any) -> list[str]:
    """The error, or the schema problem, or the result; as HTML lines."""
    error = getattr(inv, "error", None)
    if error is not None:
        retry = " (retryable)" if getattr(error, "retryable", False) else ""
        return [
            f"<div><b>{esc(clipped(error.code))}</b>{esc(retry)}: {esc(said(error.message))}</div>"
        ]
    out = []
    if _state(inv) == "warning":
        out += [
            f'<div class="murmur-schema-problem">{_badge("warning", WARN)}{esc(p)}</div>'
            for p in problems_of(inv)
        ]
    if getattr(inv, "ok", False):
        text = _short_json(getattr(inv, "result", None))
        is_open = " open" if text.count("\n") < OPEN_LINES else ""
        out.append(
            f"<details{is_open}><summary><b>result</b></summary>"
            f'<pre style="{_RESULT_PRE}">{esc(text)}</pre></details>'
        )
    return out


def shows_evidence(inv: Any) -> bool:
    """Whether a returned invocation's evidence is worth showing: its process crashed, or
    it answered with an error and said something on stderr."""
    evidence = getattr(inv, "evidence", None)
    if evidence is None:
        return False
    return bool(evidence.crashed or (not getattr(inv, "ok", False) and evidence.stderr_tail))


def evidence_html(evidence: Any) -> str:
    """How a module's process ended, as a block: status or signal, stdout head, stderr tail."""
    if evidence is None:
        return ""
    return (
        f'<div class="murmur-evidence"><b>how the module ended</b>'
        f'<pre style="{_PRE}">{esc(chr(10).join(evidence.lines()))}</pre></div>'
    )


def invocation_card(inv: Any) -> str:
    """The invocation as a compact HTML card."""
    state = _state(inv)
    muted = f"color:{FG_MUTED};font-size:12px"
    lines = [
        f'<div><b>{esc(getattr(inv, "capability", ""))}</b> '
        f"{_badge(state_label(inv), _TONES.get(state, ERROR))}"
        f'<span style="{muted}">approval: {esc(getattr(inv, "approval", ""))}</span></div>',
        *_outcome_lines(inv),
    ]
    lines += [f"<div>{_badge('warning', WARN)}{esc(w)}</div>" for w in shown_warnings(inv)]
    arts = first_rows(getattr(inv, "artifacts", None) or (), _artifact_line, _ALL_ARTIFACTS)
    lines += [f"<div>{_badge('artifact', BORDER)}{esc(a)}</div>" for a in arts]
    for aid, code, message in rejected_rows(inv):
        lines.append(
            f"<div>{_badge('rejected', ERROR)}<b>{esc(aid)}</b> "
            f"(<code>{esc(code)}</code>): {esc(message)}</div>"
            if code
            else f"<div>{esc(message)}</div>"
        )
    if shows_evidence(inv):
        lines.append(evidence_html(inv.evidence))
    confinement = getattr(inv, "confinement", "")
    if confinement:
        lines.append(f'<div style="{muted}">confinement: {esc(confinement)}</div>')
    return (
        f'<div class="murmur-invocation-card" data-state="{esc(state)}" '
        f'style="{_FRAME};border-color:{BORDER};border-left:4px solid {_TONES.get(state, ERROR)}">'
        + "".join(lines)
        + "</div>"
    )


def _text_json(value: Any) -> str:
    """The result for the text summary: its continuation lines indented under ``result:``."""
    return _short_json(value, 300).replace("\n", "\n  ")


def invocation_text(inv: Any) -> str:
    """The invocation as a few lines of text (``text/plain``, ``repr()``), safe to print to
    a terminal whatever the module said."""
    out = [f"Invocation {getattr(inv, 'capability', '')}: {state_label(inv)}"]
    error = getattr(inv, "error", None)
    if error is not None:
        out.append(f"  {clipped(error.code)}: {said(error.message)}")
    if _state(inv) == "warning":
        out += [f"  warning: {p}" for p in problems_of(inv)]
    if getattr(inv, "ok", False):
        out.append(f"  result: {_text_json(getattr(inv, 'result', None))}")
    out += [f"  warning: {w}" for w in shown_warnings(inv)]
    arts = getattr(inv, "artifacts", None) or ()
    out += [f"  {a}" for a in first_rows(arts, _artifact_text_line, _ALL_ARTIFACTS)]
    out += [
        f"  rejected {aid} ({code}): {message}" if code else f"  {message}"
        for aid, code, message in rejected_rows(inv)
    ]
    if shows_evidence(inv):
        out += [f"  {line}" for line in inv.evidence.lines()]
    if getattr(inv, "confinement", ""):
        out.append(f"  confinement: {inv.confinement}")
    return printable("\n".join(out))


def artifact_card(artifact: Any) -> str:
    """A verified artifact as a one-line HTML card (what, where, how big, which digest)."""
    title = clipped(getattr(artifact, "title", "") or artifact.id)
    kind = clipped(getattr(artifact, "kind", "") or getattr(artifact, "presentation", ""))
    return (
        f'<div class="murmur-artifact-card" style="{_FRAME};border-color:{BORDER};'
        f'border-left:4px solid {OK}">{_badge("verified", OK)}<b>{esc(title)}</b> '
        f'<span style="color:{FG_MUTED};font-size:12px">{esc(kind)} · '
        f"{esc(_artifact_line(artifact))}</span></div>"
    )


def artifact_text(artifact: Any) -> str:
    """A verified artifact in one line of text."""
    return printable(f"VerifiedArtifact {_artifact_line(artifact)}")


DISPLAY.update({"text/html": artifact_card, "text/plain": artifact_text})

"""The checker's report as HTML: a stack of cards that fits any output width.

A notebook output is often 700 to 900 px wide, nbconvert pages and GitHub narrower still,
and the theme may be light or dark. So nothing here has a fixed width or a background of
its own: each problem is a card (a coloured left edge, its sections one under another),
text and ``<pre>`` blocks wrap anywhere, colours come from JupyterLab's theme variables with
fallbacks readable on either background, and the passes fold into one ``<details>`` line.
Only inline styles and plain tags are used, so a sanitized (untrusted) output keeps them.

A report is read through :class:`ReportView` and :class:`ResultView`, what this module needs
of a report and its rows, so both checkers' reports (:class:`~murmur_nb.CheckReport` and
:class:`~murmur_nb.HookCheckReport`) show the same way, and import this module, never the
other way round (no import cycle, not even a type-only one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from murmur_nb._render.core import esc

__all__ = ["BLOCKS", "ReportView", "ResultView", "report_html"]

#: Sections shown as blocks of their own lines (``<pre>``), never re-wrapped by the report.
BLOCKS = frozenset({"stderr tail", "input", "reproduce"})

COLOURS = {
    "fail": "var(--jp-error-color1, #d32f2f)",
    "warn": "var(--jp-warn-color1, #b26a00)",
    "skipped": "var(--jp-ui-font-color2, #808080)",
    "pass": "var(--jp-success-color1, #388e3c)",
}
_WRAP = "max-width:100%;box-sizing:border-box;overflow-wrap:anywhere;word-break:break-word"
_PRE = (
    f"{_WRAP};white-space:pre-wrap;margin:2px 0 6px;padding:4px 6px;border-radius:3px;"
    "background:var(--jp-layout-color2, rgba(127,127,127,0.12));color:inherit;"
    "font-size:0.92em;line-height:1.35"
)
_LABEL = "margin:4px 0 0;font-weight:600;opacity:0.75;font-size:0.9em"
_TEXT = f"{_WRAP};margin:0 0 2px"


class ResultView(Protocol):
    """One row of a report, as the HTML reads it (a ``CheckResult``)."""

    @property
    def status(self) -> str: ...
    @property
    def check(self) -> str: ...
    @property
    def detail(self) -> str: ...
    def where(self) -> str: ...
    def sections(self) -> list[tuple[str, str]]: ...


class ReportView(Protocol):
    """A whole report, as the HTML reads it (a ``CheckReport``)."""

    @property
    def module(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def results(self) -> Sequence[ResultView]: ...
    def ordered(self) -> Sequence[ResultView]: ...
    def suite(self) -> str: ...
    def counts(self) -> dict[str, int]: ...
    def sent(self) -> str: ...
    def skipped_groups(self) -> list[tuple[str, list[str]]]: ...
    def passes_line(self) -> str: ...


def tag(status: str, text: str = "") -> str:
    """A status word in the page's own text colour, framed in the status colour (coloured
    text would fall below WCAG contrast for warnings on white)."""
    return (
        f'<b class="murmur-check-tag" style="display:inline-block;padding:0 6px;'
        f"border:1px solid {COLOURS[status]};border-left-width:4px;border-radius:3px;"
        f'color:inherit">{esc(text or status.upper())}</b>'
    )


def report_html(report: ReportView) -> str:
    """The whole report: a headline with counts, each failure and warning as a card, the
    skipped checks one line per reason, then the passes folded into one line."""
    rows = report.ordered()
    cards = "".join(problem_html(r) for r in rows if r.status in ("fail", "warn"))
    return (
        f'<div class="murmur-check" style="{_WRAP};width:100%">{headline_html(report)}'
        f"{cards}{skipped_html(report)}{passes_html(report)}</div>"
    )


def headline_html(report: ReportView) -> str:
    verdict = "passes" if report.ok else "fails"
    badges = " ".join(tag(s, f"{n} {s}") for s, n in report.counts().items())
    return (
        f'<p class="murmur-check-head" style="{_TEXT}"><b>{esc(report.module)}</b> '
        f"{verdict} {esc(report.suite())}: {badges}<br><small>{report.duration_s:.1f} s; "
        f"{esc(report.sent())}</small></p>"
    )


def problem_html(result: ResultView) -> str:
    """One failed or warned check: headline, then its sections one under another."""
    colour = COLOURS[result.status]
    where = esc(result.where().strip(" []"))
    head = (
        f'<div style="{_TEXT}">{tag(result.status)} '
        f"<code>{esc(result.check)}</code>"
        + (f' <span style="opacity:0.8">{where}</span>' if where else "")
        + "</div>"
    )
    body = "".join(section_html(label, text) for label, text in result.sections())
    return (
        f'<div class="murmur-check-item" data-status="{result.status}" '
        f'data-check="{esc(result.check)}" style="{_WRAP};border-left:4px solid '
        f'{colour};padding:4px 8px;margin:8px 0">{head}{body}</div>'
    )


def section_html(label: str, text: str) -> str:
    body = (
        f'<pre class="murmur-check-{label.replace(" ", "-")}" style="{_PRE}">'
        f"{esc(text)}</pre>"
        if label in BLOCKS
        else f'<div style="{_TEXT}">{esc(text)}</div>'
    )
    return f'<div class="murmur-check-label" style="{_LABEL}">{esc(label)}</div>{body}'


def skipped_html(report: ReportView) -> str:
    items = "".join(
        f'<li style="{_TEXT}"><code>{esc(", ".join(checks))}</code>: '
        f"{esc(reason)}</li>"
        for reason, checks in report.skipped_groups()
    )
    if not items:
        return ""
    return (
        f'<div class="murmur-check-skipped" style="{_WRAP};margin:8px 0">'
        f'{tag("skipped")}<ul style="margin:2px 0;padding-left:20px">'
        f"{items}</ul></div>"
    )


def passes_html(report: ReportView) -> str:
    items = "".join(
        f'<li style="{_TEXT}"><code>{esc(r.check)}</code>'
        f"{esc(r.where())}{': ' + esc(r.detail) if r.detail else ''}</li>"
        for r in report.results
        if r.status == "pass"
    )
    return (
        f'<details class="murmur-check-passes" style="{_WRAP};margin:8px 0">'
        f'<summary style="cursor:pointer">{tag("pass")} '
        f"{esc(report.passes_line())}</summary>"
        f'<ul style="margin:2px 0;padding-left:20px">{items}</ul></details>'
    )

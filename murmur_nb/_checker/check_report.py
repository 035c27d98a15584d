"""The module checker's report: one row per check, as a DataFrame, HTML, text or JSON.

The report is plain data first (a list of :class:`CheckResult`), so a script, a CI job and a
notebook read the same thing; pandas is imported only by :meth:`CheckReport.to_frame`.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["STATUSES", "CheckReport", "CheckResult", "Status"]

Status = Literal["pass", "fail", "warn", "skipped"]
#: Every status, worst first (the order of the summary line).
STATUSES: tuple[Status, ...] = ("fail", "warn", "skipped", "pass")
_COLOURS = {
    "fail": "var(--jp-error-color1, #c62828)",
    "warn": "var(--jp-warn-color1, #a15c00)",
    "skipped": "var(--jp-ui-font-color2, #616161)",
    "pass": "var(--jp-success-color1, #2e7d32)",
}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check: what was checked, how it went, the rule, where it broke and the fix.

    ``path`` is a JSON path into the descriptor or the envelope (like the seed's
    ``ValidationError.Path``), empty when the check is about the module as a whole.
    ``reproduce`` is a one-line command that sends the failing input again, and ``stderr``
    the tail of the module's standard error on it (control characters escaped).
    """

    check: str
    status: Status
    rule: str
    capability: str = ""
    path: str = ""
    detail: str = ""
    fix: str = ""
    reproduce: str = ""
    stderr: str = ""

    def line(self) -> str:
        """One readable line: status, check, capability, path and detail."""
        where = " ".join(p for p in (self.capability, self.path) if p)
        where = f" [{where}]" if where else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.status.upper():7} {self.check}{where}{detail}"


@dataclass
class CheckReport:
    """The outcome of :func:`murmur_nb.check_module`.

    Iterate it for :class:`CheckResult` rows; :attr:`ok` is false when any check failed.
    In a notebook it shows as a table; ``str(report)`` is the plain-text summary.
    """

    module: str
    path: Path
    results: list[CheckResult] = field(default_factory=list)
    duration_s: float = 0.0
    examples: int = 0
    seed: int = 0
    #: Inputs sent per capability, by kind: boundary kinds (``maximum``, ``enum`` ...) and
    #: ``random``.
    inputs: dict[str, dict[str, int]] = field(default_factory=dict)

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def ok(self) -> bool:
        """Whether no check failed (warnings and skipped checks do not fail a module)."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks, in order."""
        return [r for r in self.results if r.status == "fail"]

    @property
    def warnings(self) -> list[CheckResult]:
        """The checks that passed with a warning, in order."""
        return [r for r in self.results if r.status == "warn"]

    def counts(self) -> dict[str, int]:
        """How many checks ended in each status (every status present, zero included)."""
        seen = Counter(r.status for r in self.results)
        return {s: seen.get(s, 0) for s in STATUSES}

    def summary(self) -> str:
        """The plain-text report: a verdict line, then failures, warnings and skips."""
        counts = self.counts()
        verdict = "PASS" if self.ok else "FAIL"
        head = (
            f"{verdict} {self.module} ({self.path}): "
            + ", ".join(f"{n} {s}" for s, n in counts.items())
            + f" in {self.duration_s:.1f} s ({self.sent()})"
        )
        lines = [head]
        for result in self.results:
            if result.status == "pass":
                continue
            lines.append("  " + result.line())
            if result.status == "fail" or result.stderr or result.reproduce:
                lines.append(f"          rule: {result.rule}")
                lines.append(f"          fix:  {result.fix}")
            if result.reproduce:
                lines.append(f"          reproduce: {result.reproduce}")
            if result.stderr:
                tail = result.stderr.replace("\n", "\n          | ")
                lines.append(f"          stderr tail:\n          | {tail}")
        return "\n".join(lines)

    def sent(self) -> str:
        """What was sent: boundary and random inputs over all capabilities, and the seed."""
        boundary = sum(n for kinds in self.inputs.values() for k, n in kinds.items()
                       if k != "random")  # fmt: skip
        random = sum(kinds.get("random", 0) for kinds in self.inputs.values())
        return (
            f"{boundary} boundary then {random} random inputs over {len(self.inputs)} "
            f"capabilities; {self.examples} random examples per capability, seed {self.seed}"
        )

    def __str__(self) -> str:
        return self.summary()

    def to_records(self) -> list[dict[str, Any]]:
        """The rows as plain dicts (the ``--json`` output's ``checks``)."""
        return [asdict(r) for r in self.results]

    def to_json(self) -> dict[str, Any]:
        """Everything in the report as JSON-ready data."""
        return {
            "module": self.module,
            "path": str(self.path),
            "ok": self.ok,
            "counts": self.counts(),
            "duration_s": round(self.duration_s, 3),
            "examples": self.examples,
            "seed": self.seed,
            "inputs": self.inputs,
            "checks": self.to_records(),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per check; columns check, status, capability, path, detail, rule, fix,
        reproduce and stderr."""
        import pandas as pd  # noqa: PLC0415 - pandas only when a frame is asked for

        columns = ["check", "status", "capability", "path", "detail", "rule", "fix",
                   "reproduce", "stderr"]  # fmt: skip
        frame = pd.DataFrame(self.to_records(), columns=columns)
        frame["status"] = pd.Categorical(frame["status"], categories=list(STATUSES))
        return frame

    def _repr_html_(self) -> str:
        counts = self.counts()
        verdict = "passes" if self.ok else "fails"
        badges = " ".join(
            f'<span style="color:{_COLOURS[s]};font-weight:600">{n} {s}</span>'
            for s, n in counts.items()
        )
        rows = "".join(_html_row(r) for r in self.results)
        return (
            f'<div class="murmur-check"><p><b>{html.escape(self.module)}</b> {verdict} the '
            f"modproto v1 checks: {badges} <small>({self.duration_s:.1f} s, "
            f"{html.escape(self.sent())})</small></p>"
            '<table><thead><tr><th>status</th><th>check</th><th>capability</th><th>path</th>'
            f"<th>detail</th><th>rule</th><th>fix</th></tr></thead><tbody>{rows}</tbody>"
            "</table></div>"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())


def _html_row(result: CheckResult) -> str:
    cells = (result.check, result.capability, result.path, result.detail, result.rule)
    status = (
        f'<td style="color:{_COLOURS[result.status]};font-weight:600">{result.status}</td>'
    )
    body = "".join(f"<td>{html.escape(c)}</td>" for c in cells)
    fix = html.escape(result.fix) if result.status != "pass" else ""
    extra = "".join(
        f"<br><small>{label}:</small><pre>{html.escape(text)}</pre>"
        for label, text in (("reproduce", result.reproduce), ("stderr tail", result.stderr))
        if text
    )
    return f"<tr>{status}{body}<td>{fix}{extra}</td></tr>"

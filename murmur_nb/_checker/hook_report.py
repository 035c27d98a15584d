"""The hook checker's report: one row per rule, as text, JSON, HTML or a DataFrame.

Its own small code, with the module checker's conventions (:mod:`.check_report`): a verdict
line first, then every row that did not pass, failures first, with its rule and fix line;
``ok`` is false when any rule failed; pandas only in :meth:`HookCheckReport.to_frame`. In a
notebook it is the module checker's report (:func:`.check_html.report_html`): a card per
failure and warning, skipped rules one line per reason, the passes folded into one line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from murmur_nb._checker.check_html import report_html
from murmur_nb._checker.check_report import STATUSES, Results, Status
from murmur_nb._rules import printable_json

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["HookCheckReport", "HookCheckResult"]

#: A rule's outcome: the module checker's statuses.
HookStatus = Status


@dataclass(frozen=True, slots=True)
class HookCheckResult:
    """One rule: its id (``check``), how it went, what happened, the rule's text and the fix."""

    check: str
    status: HookStatus
    detail: str = ""
    rule: str = ""
    fix: str = ""

    def line(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.status.upper():7} {self.check}{detail}"

    def where(self) -> str:
        """Empty: a hook rule is about the whole component (the module checker's rows name
        a capability and a path)."""
        return ""

    def sections(self) -> list[tuple[str, str]]:
        """What a report shows of this row, as ``(label, text)`` pairs: what happened, the
        rule and the fix."""
        out = [("what happened", self.detail)] if self.detail else []
        return [*out, ("rule", self.rule), ("fix", self.fix)]


@dataclass
class HookCheckReport(Results[HookCheckResult]):
    """The outcome of :func:`murmur_nb.check_hook`.

    Iterate it for :class:`HookCheckResult` rows (one per rule); :attr:`ok` is false when any
    rule failed. In a notebook it shows as a table; ``str(report)`` is the text summary.
    """

    component: Path
    results: list[HookCheckResult] = field(default_factory=list)
    duration_s: float = 0.0
    digest: str = ""
    #: The limits every call ran under (``murmur.yaml``'s, or the defaults).
    limits: dict[str, Any] = field(default_factory=dict)
    #: The generated records: name -> messages in it.
    cases: dict[str, int] = field(default_factory=dict)
    calls: int = 0

    def ran(self) -> str:
        """What was run: calls, records and the time limit."""
        return (
            f"{self.calls} calls on {len(self.cases)} generated records, "
            f"time limit {self.limits.get('time_ms', '?')} ms a call"
        )

    @property
    def module(self) -> str:
        """The component's file name (the report's headline names it)."""
        return self.component.name

    def suite(self) -> str:
        """What the report checked, as its headline names it."""
        return "the hook checks"

    def sent(self) -> str:
        """What was run (the headline's second line): :meth:`ran`."""
        return self.ran()

    def skipped_groups(self) -> list[tuple[str, list[str]]]:
        """The skipped rules as ``(reason, [rule, ...])``, one per reason."""
        groups: dict[str, list[str]] = {}
        for row in self.results:
            if row.status == "skipped":
                groups.setdefault(row.detail, []).append(row.check)
        return list(groups.items())

    def summary(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        head = (
            f"{verdict} {self.component.name} ({self.component}): "
            + ", ".join(f"{n} {s}" for s, n in self.counts().items())
            + f" in {self.duration_s:.1f} s ({self.ran()})"
        )
        lines = [head]
        for result in self.ordered():
            if result.status == "pass":
                continue
            lines.append("  " + result.line())
            if result.status == "fail":
                lines.append(f"          rule: {result.rule}")
                lines.append(f"          fix:  {result.fix}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_records(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.results]

    def to_json(self, indent: int | None = None) -> str:
        """Everything in the report as one JSON document (the ``--json`` output);
        :meth:`to_dict` is the same as Python data."""
        return printable_json(self.to_dict(), indent=indent)

    def to_dict(self) -> dict[str, Any]:
        """Everything in the report as JSON values (:meth:`to_json` is its text)."""
        return {
            "component": str(self.component),
            "digest": self.digest,
            "ok": self.ok,
            "counts": self.counts(),
            "duration_s": round(self.duration_s, 3),
            "calls": self.calls,
            "limits": self.limits,
            "cases": self.cases,
            "checks": self.to_records(),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per rule; columns check, status, detail, rule and fix."""
        import pandas as pd  # noqa: PLC0415 - pandas only when a frame is asked for

        frame = pd.DataFrame(self.to_records(), columns=["check", "status", "detail", "rule",
                                                         "fix"])  # fmt: skip
        frame["status"] = pd.Categorical(frame["status"], categories=list(STATUSES))
        return frame

    def _repr_html_(self) -> str:
        return report_html(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())

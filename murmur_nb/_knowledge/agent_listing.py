"""The capability list an agent would see, priced in tokens before anything is loaded.

What an agent sees of a module is its capabilities' summaries, one line each (the seed:
"every enabled capability costs roughly one line of context"), plus whatever overlays and
skills the host folds in. :class:`AgentListing` prices that from the descriptors alone, so
an operator sees what enabling a module costs. A summary is folded to one line and capped at
240 characters, so a module cannot buy itself more context with a long or multi-line one.
Line costs are the host's own estimate (:func:`estimate_tokens`); overlay and skill costs are
the modules' declared ``tokens``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from murmur_nb._render.core import esc
from murmur_nb.protocol import Capability, Descriptor

__all__ = ["MAX_LINE_CHARS", "AgentListing", "CapabilityLine", "agent_listing", "estimate_tokens"]

#: Longest capability line shown to an agent; a longer summary is cut with an ellipsis.
MAX_LINE_CHARS = 240


def estimate_tokens(text: str) -> int:
    """The host's own rough token count of ``text``: one per four UTF-8 bytes, at least one."""
    return max(1, -(-len(text.encode()) // 4))


@dataclass(frozen=True)
class CapabilityLine:
    """One enabled capability as an agent sees it, and what it costs in context.

    ``line`` is ``"<id>: <summary>"`` folded to one line of at most 240 characters;
    ``context_tokens`` is that line plus the module's overlays plus this capability's
    skills (declared estimates): the cost when this capability is in play.
    """

    module: str
    capability: str
    line: str
    skills: tuple[str, ...]
    skill_tokens: int
    overlay_tokens: int

    @property
    def line_tokens(self) -> int:
        return estimate_tokens(self.line)

    @property
    def context_tokens(self) -> int:
        return self.line_tokens + self.overlay_tokens + self.skill_tokens


def _one_line(capability: Capability) -> str:
    line = f"{capability.id}: {' '.join(capability.summary.split()) or capability.title}"
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"


@dataclass(frozen=True)
class AgentListing:
    """The capability list an agent would see, priced in tokens before anything is loaded.

    Attributes
    ----------
    lines
        One :class:`CapabilityLine` per capability of every enabled module (accepted, and
        no unmet requirement), modules in id order.
    overlays
        Module id -> ``(overlay id, declared tokens)`` of its overlays.
    skipped
        ``"<module>: <why>"`` for each module whose capabilities are not offered.
    """

    lines: tuple[CapabilityLine, ...]
    overlays: dict[str, tuple[tuple[str, int], ...]]
    skipped: tuple[str, ...]

    def module_tokens(self, module_id: str) -> int:
        """What enabling ``module_id`` costs always: its lines and its overlays."""
        lines = sum(x.line_tokens for x in self.lines if x.module == module_id)
        return lines + sum(t for _, t in self.overlays.get(module_id, ()))

    @property
    def always_tokens(self) -> int:
        """Every line and every overlay: the standing cost of the enabled modules."""
        return sum(self.module_tokens(m) for m in self.overlays)

    def text(self) -> str:
        """What the agent reads (the lines), then the costs, in stable plain text."""
        out = [
            f"agent capability list · {len(self.overlays)} modules · {len(self.lines)} lines · "
            f"{self.always_tokens} tokens always"
        ]
        for module_id, overlays in self.overlays.items():
            names = ", ".join(f"{o} {t}" for o, t in overlays) or "none"
            out.append(
                f"{module_id}: {self.module_tokens(module_id)} tokens always (overlays: {names})"
            )
            for x in (x for x in self.lines if x.module == module_id):
                skills = ", ".join(x.skills) or "no skills"
                out.append(f"  {x.line}")
                out.append(
                    f"    in play: {x.context_tokens} tokens (line {x.line_tokens}, overlays "
                    f"{x.overlay_tokens}, skills {x.skill_tokens}: {skills})"
                )
        out += [f"not offered: {s}" for s in self.skipped]
        return "\n".join(out)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": f"<pre>{esc(self.text())}</pre>"}


def agent_listing(infos: Iterable[Any]) -> AgentListing:
    """Price the capability lists of ``infos`` (``ModuleInfo`` objects, any order)."""
    lines: list[CapabilityLine] = []
    overlays: dict[str, tuple[tuple[str, int], ...]] = {}
    skipped: list[str] = []
    for info in sorted(infos, key=lambda i: i.id):
        descriptor: Descriptor | None = info.descriptor
        if descriptor is None or not info.ok:
            skipped.append(f"{info.id}: refused")
            continue
        if info.needs_setup:
            skipped.append(f"{info.id}: needs setup")
            continue
        own = tuple((o.id, max(o.tokens, 0)) for o in descriptor.agent_overlays or [])
        overlays[info.id] = own
        tokens = {s.id: max(s.tokens, 0) for s in reversed(descriptor.skills or [])}
        for cap in descriptor.capabilities or []:
            ids = tuple(dict.fromkeys(cap.skills or []))
            lines.append(
                CapabilityLine(
                    module=info.id,
                    capability=cap.id,
                    line=_one_line(cap),
                    skills=ids,
                    skill_tokens=sum(tokens.get(i, 0) for i in ids),
                    overlay_tokens=sum(t for _, t in own),
                )
            )
    return AgentListing(tuple(lines), overlays, tuple(skipped))

"""The whole-rendering budget: one account per ``render(...)`` call, over all its artifacts.

Per-artifact bounds multiply (one 4 MiB file listed 150 times became 800 MiB of HTML), and
embedding is work done for a guest, so it is bounded like the guest's own (SPEC §1). Each
artifact renders with the budget narrowed to what is left (:func:`~.core.within`), then its
output is counted; a part still too large becomes a link. A later artifact with a digest
already shown is a short card referring to the first (verified again unless it is the very
same claim). Past the total an artifact is a small link card (a link only where one opens:
:func:`~.downloads.linked`), and after :data:`LISTED_PAST`
of those the rest are counted in one line, so output stays under ``total_bytes`` plus a few
hundred cards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from murmur_nb._render.core import (
    Body,
    PixelBudget,
    RenderBudget,
    Rendering,
    Source,
    esc,
    format_size,
    short_digest,
    source_rendering,
    within,
)
from murmur_nb._render.downloads import linked
from murmur_nb._render.fallback import render_one, verify_source
from murmur_nb._render.primitives.media import download_line

__all__ = ["LISTED_PAST", "Account", "note_rendering", "omitted_rendering"]

#: Cards (links past the total, references to a content shown above) listed at most in one
#: rendering once the total is reached; the artifacts past them are counted in one line.
LISTED_PAST = 200

#: Below this many bytes left, an artifact is not even tried: it is shown as a link.
_ROOM = 2048

_Claim = tuple[str, str, str, str, int, str]
_CardMaker = Callable[[Source], Rendering]


def _claim(source: Source) -> _Claim:
    return (
        str(source.root_dir),
        source.root,
        source.rel_path,
        str(source.file),
        source.bytes,
        source.digest,
    )


def _size(part: Rendering) -> int:
    return len(part.html) + len(part.text)


@dataclass
class Account:
    """What one rendering has produced so far, and which contents it has shown.

    Only :meth:`render` and :meth:`count` change what it spent, each for the part it
    returns; the renderers take what they decode from :attr:`pixels`, the rendering's one
    pixel budget (handed to each through :meth:`narrowed`). What is bounded by count, not
    by size (invocations, rejected artifacts' error cards), is counted in :attr:`calls` and
    :attr:`rejected` by what draws it, so one bound holds for a whole list.
    """

    budget: RenderBudget
    spent: int = 0
    #: digest -> the label of the artifact that showed it
    shown: dict[str, str] = field(default_factory=dict)
    #: claims verified (and shown) in this rendering
    checked: set[_Claim] = field(default_factory=set)
    #: cards listed past the total (links and references)
    listed_past: int = 0
    #: artifacts neither shown nor listed (past :data:`LISTED_PAST`)
    omitted: int = 0
    #: invocations drawn in this rendering (a list's, and nested lists' too)
    calls: int = 0
    #: rejected artifacts drawn as error cards in this rendering, bare or an invocation's
    rejected: int = 0
    #: what the rendering may still decode (``budget.decode_px`` at the start)
    pixels: PixelBudget = field(init=False)

    def __post_init__(self) -> None:
        self.pixels = PixelBudget(self.budget.decode_px)

    @property
    def left(self) -> int:
        return max(0, self.budget.total_bytes - self.spent)

    def narrowed(self) -> RenderBudget:
        """The budget for the next artifact: what is left of the total and of the pixels."""
        return within(self.budget, self.left, self.pixels)

    def count(self, part: Rendering) -> Rendering:
        """Add ``part`` (an error card, a grid, a header) to what was produced."""
        self.spent += _size(part)
        return part

    def render(self, source: Source, presentation: str, *, verify: bool) -> Rendering | None:
        """``source`` rendered within what is left, a card referring to the same content
        shown above, a link past the total, or ``None`` once even links are past their cap
        (counted in :attr:`omitted`)."""
        first = self.shown.get(source.digest)
        if first is not None or self.left < _ROOM:
            if self.listed_past >= LISTED_PAST:
                self.omitted += 1
                return None
            self.listed_past += 1
            card = _reference if first is not None else _past_total
            return self.count(self._checked(source, verify, lambda s: card(s, self.budget, first)))
        left = self.left
        part = render_one(source, presentation, self.narrowed(), verify=verify)
        if _size(part) > left:
            self.listed_past += 1
            part = _past_total(source, self.budget, None)
        if part.ok:
            self.shown[source.digest] = f"{source.id!r} ({source.rel_path})"
            self.checked.add(_claim(source))
        return self.count(part)

    def _checked(self, source: Source, verify: bool, card: _CardMaker) -> Rendering:
        """``card(source)`` once ``source`` is verified (or was, as this very claim)."""
        if not verify or _claim(source) in self.checked:
            return card(source)
        with contextlib.ExitStack() as held:
            checked = verify_source(source, held)
        if isinstance(checked, Rendering):
            return checked
        self.checked.add(_claim(source))
        return card(checked)


def _past_total(source: Source, budget: RenderBudget, _first: str | None) -> Rendering:
    """A link to the file (where one opens), and why it is not shown: the rendering's total
    is spent."""
    got = linked(source, budget)
    how = "linked" if got.url else "not linked (outside the folder Jupyter serves)"
    where = "" if got.url else "; it is outside the folder Jupyter serves, so it is not linked"
    body = Body(
        html=download_line(got, source),
        details=[f"{how}, not shown: the rendering reached its total budget"],
        notes=[
            f"not shown: this rendering reached its {format_size(budget.total_bytes)} total "
            f"budget (RenderBudget.total_bytes){where}; raise it, or render this artifact on "
            "its own"
        ],
    )
    return source_rendering("download", source, body)


def _reference(source: Source, budget: RenderBudget, first: str | None) -> Rendering:
    """A short card for a content already shown in this rendering."""
    note = (
        f"same content ({short_digest(source.digest)}) as artifact {first} shown above; "
        "not embedded again"
    )
    body = Body(
        html=download_line(linked(source, budget), source),
        details=[f"same content as artifact {first}, shown above"],
        notes=[note],
    )
    return source_rendering("download", source, body)


def omitted_rendering(count: int, budget: RenderBudget) -> Rendering:
    """One line for the artifacts past the total that were not even listed."""
    message = (
        f"{count} more artifact{'s' if count != 1 else ''} not shown or listed: this "
        f"rendering reached its {format_size(budget.total_bytes)} total budget "
        "(RenderBudget.total_bytes)"
    )
    return note_rendering(message)


def note_rendering(message: str) -> Rendering:
    """One line saying what a rendering leaves out, and why."""
    return Rendering(
        primitive="omitted",
        text=f"omitted · {message}",
        html=f'<div class="murmur-note" style="font-size:12px">{esc(message)}</div>',
    )

"""Step through the pages of a ``slides`` rendering, one at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as w

from murmur_nb.widgets._html import TextView, esc

__all__ = ["SlideStepper"]


class SlideStepper(TextView):
    """Previous / Next over the slides of one rendering.

    Parameters
    ----------
    slides : sequence
        Objects with ``index``, ``html`` and ``text`` (``Rendering.slides``).
    title : str
        Shown above the page.
    """

    def __init__(self, slides: Sequence[Any], title: str = "") -> None:
        if not slides:
            raise ValueError("a slide stepper needs at least one slide")
        self.slides = list(slides)
        self.title = title
        self.index = 0
        self.previous_button = w.Button(description="◀ Previous", tooltip="previous slide")
        self.next_button = w.Button(description="Next ▶", tooltip="next slide")
        self.position = w.Label()
        self.page = w.HTML()
        self.previous_button.on_click(lambda _b: self.go(self.index - 1))
        self.next_button.on_click(lambda _b: self.go(self.index + 1))
        header = w.HBox([self.previous_button, self.position, self.next_button])
        caption = w.HTML(f"<b>{esc(title)}</b>") if title else w.HTML()
        super().__init__([caption, header, self.page])
        self.go(0)

    def go(self, index: int) -> None:
        """Show slide ``index`` (0-based), clamped to the slides there are."""
        self.index = max(0, min(index, len(self.slides) - 1))
        slide = self.slides[self.index]
        self.page.value = slide.html
        self.position.value = f"slide {self.index + 1} of {len(self.slides)}"
        self.previous_button.disabled = self.index == 0
        self.next_button.disabled = self.index == len(self.slides) - 1

    def text(self) -> str:
        slide = self.slides[self.index]
        head = f"SlideStepper {self.title}: " if self.title else "SlideStepper: "
        return f"{head}slide {self.index + 1} of {len(self.slides)}: {slide.text}"

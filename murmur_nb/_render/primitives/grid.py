"""``image_grid``: several images of one invocation, or a JSON list of image paths, as one grid.

The images of one invocation that carry the ``image_grid`` hint render together, in order,
placed where the first of them was (see :mod:`murmur_nb._render.render`); a JSON artifact
with the hint may instead list image paths relative to its root, each opened beneath the root
without following a link and read from the checked descriptor
(:mod:`murmur_nb._render.listed`); only the first ``RenderBudget.grid_images`` entries of
the list are read, the rest counted. Thumbnails and the byte budget live in
:func:`~.media.grid_html`; this module builds the card and the ``text/plain`` listing.
"""

from __future__ import annotations

import contextlib
import resource
from pathlib import Path

from murmur_nb._render.core import (
    Body,
    RenderBudget,
    Rendering,
    Source,
    card,
    format_size,
    short_digest,
    source_rendering,
)
from murmur_nb._render.listed import TOO_MANY, listed_paths, open_listed
from murmur_nb._render.primitives.media import GridItem, grid_html
from murmur_nb._render.primitives.text import load_json

__all__ = ["NOT_HELD", "grid_rendering", "json_grid_rendering", "max_held"]


#: The ``file`` of a grid source that was verified but not kept open (see :func:`max_held`).
NOT_HELD = Path("/nonexistent/murmur-nb/not-held")


def max_held() -> int:
    """Grid images kept open at once: a quarter of the descriptor limit, at least 64.

    Each verified image is read through its open descriptor, so a grid holds one per image
    until it is drawn; past this many, images are verified but listed, not drawn.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(64, soft // 4) if soft > 0 else 256


def grid_rendering(sources: list[Source], budget: RenderBudget, notes: list[str]) -> Rendering:
    items = [
        GridItem(s.title, s.file, s.media_type)
        if s.file != NOT_HELD
        else GridItem(s.title, None, s.media_type, TOO_MANY)
        for s in sources
    ]
    body_html, grid_notes = grid_html(items, budget)
    body = Body(html=body_html, notes=[*notes, *grid_notes])
    if len(sources) == 1:
        return source_rendering("image_grid", sources[0], body)
    total = sum(s.bytes for s in sources)
    body.details = _capped(
        [
            f"{n}. {s.title} · {format_size(s.bytes)} · {short_digest(s.digest)}"
            for n, s in enumerate(sources, 1)
        ]
    )
    title = f"{len(sources)} images"
    lines = [f"image_grid · {title} · {format_size(total)}"]
    lines += [f"  {d}" for d in body.details]
    lines += [f"  note: {n}" for n in body.notes]
    html = card("image_grid", body, title=title, size=total)
    return Rendering(primitive="image_grid", text="\n".join(lines), html=html)


def _capped(listing: list[str], keep: int = 50) -> list[str]:
    if len(listing) <= keep:
        return listing
    return [*listing[:keep], f"… {len(listing) - keep} more"]


def json_grid_rendering(source: Source, budget: RenderBudget, notes: list[str]) -> Rendering:
    """A grid of the images a JSON artifact lists, each opened and checked beneath its root
    (:mod:`murmur_nb._render.listed`) and read through that descriptor; a refused one is a
    tile saying why."""
    entries, listed = listed_paths(load_json(source, budget), budget.grid_images)
    with contextlib.ExitStack() as held:
        images = open_listed(
            entries, source.root_dir, max_bytes=budget.parse_bytes, keep=max_held(), held=held
        )
        items = [GridItem(i.label, i.file, i.media_type, i.problem) for i in images]
        body_html, grid_notes = grid_html(items, budget, listed)
    body = Body(html=body_html, notes=[*notes, *grid_notes])
    body.details = _capped(
        [
            f"{n}. {i.label}" + (f" ({i.problem})" if i.problem else "")
            for n, i in enumerate(images, 1)
        ]
    )
    if listed > len(images):
        body.details.append(f"… {listed - len(images)} more listed, not read")
    body.details.insert(0, f"{listed} images listed")
    return source_rendering("image_grid", source, body)

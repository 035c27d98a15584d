"""Render verified artifacts inline: ``render(invocation)``, ``render(artifact)``, ``render_file``.

One artifact is re-verified, resolved and drawn along the fallback chain of :mod:`.fallback`
(a failed check is an error card). Anything shaped like the host's ``VerifiedArtifact`` or
``Invocation`` renders (:mod:`.inputs`), so a gallery is ``render([...])``. The ``image_grid``
images of one invocation become one grid where the first was (:mod:`.primitives.grid`).
Everything one call shows is drawn against one :class:`~.total.Account`, bounded by
:attr:`RenderBudget.total_bytes`, each content embedded once. Rejected artifacts are error
cards counted but not bounded by it, so only the first :data:`~.card.MAX_ROWS` are drawn, as
the invocation's card lists them, and one line counts the rest (40,000 of them were 28.5 MB
of HTML); a list of them (``render(inv.rejected_artifacts)``) is cut the same way, its line
saying how to draw others (20,000 were 14 MB).

A list is one rendering, bounded as a whole: its rejected artifacts, bare or an
invocation's, share the one :data:`~.card.MAX_ROWS` of error cards, and it draws at most
:data:`MAX_CALLS` invocations, then one line counts the items it left out and names the
slice that draws the next ones (``render([inv] * 2000)`` drew every one: 17 MB of HTML).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import reprlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from murmur_nb._files.artifacts import RejectedArtifact
from murmur_nb._render.card import MAX_ROWS, more_listed, more_rejected, said
from murmur_nb._render.core import (
    RenderBudget,
    Rendering,
    Source,
    clipped,
    drawing_clock,
    error_card,
    esc,
)
from murmur_nb._render.fallback import verify_source
from murmur_nb._render.inputs import (
    ArtifactLike,
    InvocationLike,
    RejectedLike,
    guess_media_type,
    roots_of,
    source_of,
)
from murmur_nb._render.presentation import normalize_media_type
from murmur_nb._render.primitives.grid import NOT_HELD, grid_rendering, max_held
from murmur_nb._render.total import Account, note_rendering, omitted_rendering
from murmur_nb._render.verify import file_digest

__all__ = ["MAX_CALLS", "RenderBudget", "Rendering", "render", "render_file"]

#: Invocations one rendering draws (a list's, nested lists' too); the items of a list past
#: them are counted in one line.
MAX_CALLS = 100


def _rejected(rejected: RejectedLike) -> Rendering:
    """A rejected artifact's error card, its id and code cut as labels, its message as a
    message (:func:`~.card.said`)."""
    aid, code = clipped(rejected.id), clipped(rejected.code)
    return Rendering(
        primitive="error",
        text=f"error · {aid} · {code} (rejected by the host)",
        html=error_card(aid, code, said(rejected.message)),
        error_code=code,
    )


def _rejected_parts(inv: InvocationLike, account: Account) -> list[Rendering]:
    """The error cards of the first rejected artifacts, as many as the rendering has left of
    its :data:`~.card.MAX_ROWS` (all of them for one invocation rendered alone, as its card
    lists them), then one line counting the rest."""
    rejected = inv.rejected_artifacts
    drawn = rejected[: max(0, MAX_ROWS - account.rejected)]
    account.rejected += len(drawn)
    parts = [account.count(_rejected(r)) for r in drawn]
    if len(rejected) > len(drawn):
        parts.append(account.count(note_rendering(more_rejected(len(rejected) - len(drawn)))))
    return parts


def _render_invocation(inv: InvocationLike, account: Account) -> Rendering:
    with contextlib.ExitStack() as held:
        return _render_invocation_held(inv, account, held)


def _render_invocation_held(
    inv: InvocationLike, account: Account, held: contextlib.ExitStack
) -> Rendering:
    roots = roots_of(inv)
    account.calls += 1
    omitted_before = account.omitted
    parts: list[Rendering] = []
    grid_sources: list[Source] = []
    grid_at: int | None = None
    for artifact in inv.artifacts:
        source = source_of(artifact, roots)
        hint = (artifact.presentation or "").strip()
        if hint == "image_grid" and source.media_type.startswith("image/"):
            if len(grid_sources) < max_held():
                checked = verify_source(source, held)
            else:  # verified all the same, but not kept open (nor drawn): see max_held
                with contextlib.ExitStack() as brief:
                    checked = verify_source(source, brief)
                if not isinstance(checked, Rendering):
                    checked = dataclasses.replace(checked, file=NOT_HELD)
            if isinstance(checked, Rendering):
                parts.append(account.count(checked))
                continue
            if grid_at is None:
                grid_at = len(parts)
                parts.append(Rendering(primitive="placeholder", text="", html=""))
            grid_sources.append(checked)
            continue
        part = account.render(source, artifact.presentation, verify=True)
        if part is not None:
            parts.append(part)
    if grid_at is not None:
        grid = grid_rendering(grid_sources, account.narrowed(), [])
        parts[grid_at] = account.count(grid)
    parts.extend(_rejected_parts(inv, account))
    if account.omitted > omitted_before:
        parts.append(omitted_rendering(account.omitted - omitted_before, account.budget))
    n_ok = len(inv.artifacts)
    n_rej = len(inv.rejected_artifacts)
    header = f"invocation · {inv.capability} · {n_ok} artifact{'s' if n_ok != 1 else ''}"
    if n_rej:
        header += f", {n_rej} rejected"
    text = "\n".join([header, *(p.text for p in parts)])
    head = (
        f'<div class="murmur-invocation"><div style="font-family:system-ui,sans-serif;'
        f'font-size:13px;font-weight:600">{esc(header)}</div>'
    )
    html = "".join([head, *(p.html for p in parts), "</div>"])  # one copy of the parts
    return Rendering(primitive="invocation", text=text, html=html, parts=tuple(parts))


def render(obj: Any, *, budget: RenderBudget | None = None) -> Rendering:
    """Render an invocation's artifacts, one artifact, or a list of either (a gallery).

    Parameters
    ----------
    obj
        An ``Invocation`` (all its verified artifacts in order, ``image_grid`` images grouped
        into one grid, rejected artifacts as error cards), a ``VerifiedArtifact``, a
        ``RejectedArtifact`` (its error card), or an iterable of those.
    budget
        Size limits; :class:`RenderBudget` defaults when ``None``.

    Returns
    -------
    Rendering
        Displays itself in Jupyter; ``text/plain`` is stable across runs.

    Raises
    ------
    TypeError
        ``obj`` is none of these (a path: use :func:`render_file`), or ``budget`` is not a
        :class:`RenderBudget` (or None).

    Warns
    -----
    PresentationWarning
        When a presentation hint is unknown or cannot be honoured and the media type decides.

    Examples
    --------
    A gallery of several calls, one cell. Render while the host is open: closing it removes
    the folders its calls wrote their artifacts to::

        with home.host() as host:
            runs = [host.invoke("gallery.thumbs", {"count": 4}), host.invoke("docs.report")]
            display(mnb.render(runs))
    """
    account = Account(_budget("render", budget))
    with drawing_clock(account.budget.draw_s):
        return _render(obj, account)


def _budget(call: str, budget: object) -> RenderBudget:
    """``budget``, or the defaults for ``None``; anything else is refused, saying what to pass."""
    if budget is None:
        return RenderBudget()
    if not isinstance(budget, RenderBudget):
        hint = (
            "; for a dict of limits pass RenderBudget(**limits)"
            if isinstance(budget, Mapping)
            else ""
        )
        raise TypeError(
            f"{call}() takes budget as a RenderBudget (or None for the defaults), "
            f"not {type(budget).__name__}{hint}"
        )
    return budget


def _optional_str(call: str, name: str, value: object, example: str, none_means: str) -> None:
    """Refuse a ``str | None`` argument of another type, saying what to pass."""
    if value is not None and not isinstance(value, str):
        raise TypeError(
            f"{call}() takes {name} as a str such as {example!r} (or None {none_means}), "
            f"not {type(value).__name__} {reprlib.repr(value)}"
        )


def _render(obj: Any, account: Account) -> Rendering:
    """:func:`render` against ``account``, the one budget of the whole call."""
    if isinstance(obj, InvocationLike):
        return _render_invocation(obj, account)
    if isinstance(obj, ArtifactLike):
        part = account.render(source_of(obj, {}), obj.presentation, verify=True)
        return part or omitted_rendering(1, account.budget)
    if isinstance(obj, RejectedLike):
        account.rejected += 1
        return account.count(_rejected(obj))
    if _is_list(obj):
        return _gallery(obj, account)
    raise TypeError(
        f"render() takes an Invocation, a VerifiedArtifact or a list of them, not "
        f"{type(obj).__name__}; for a plain file use render_file(path)"
    )


def _rejected_item(item: Any) -> bool:
    """Whether :func:`_render` draws ``item`` as a rejected artifact's card: the host's own
    class is known by its type (a protocol check costs ~20 µs, 1.2 s over 20,000 of them)."""
    if isinstance(item, RejectedArtifact):
        return True
    return not isinstance(item, InvocationLike | ArtifactLike) and isinstance(item, RejectedLike)


def _is_list(obj: Any) -> bool:
    """Whether :func:`render` draws ``obj`` as a gallery of its items: an iterable, but not
    text, a path, a mapping (it iterates its keys) nor a DataFrame (its column names)."""
    return isinstance(obj, Iterable) and not (
        isinstance(obj, str | bytes | os.PathLike | Mapping) or hasattr(obj, "columns")
    )


def _past_its_bound(item: Any, account: Account) -> str | None:
    """What ``item`` is counted as, not drawn, once the rendering drew as many of its kind
    as it may: ``" rejected"`` past :data:`~.card.MAX_ROWS` error cards, ``" invocations"``
    (``" lists"``) past :data:`MAX_CALLS` invocations; ``None`` while it may be drawn."""
    if _rejected_item(item):
        return " rejected" if account.rejected >= MAX_ROWS else None
    if account.calls < MAX_CALLS:
        return None
    if isinstance(item, InvocationLike):
        return " invocations"
    return " lists" if not isinstance(item, ArtifactLike) and _is_list(item) else None


def _gallery(items: Iterable[Any], account: Account) -> Rendering:
    """Each item drawn in order; past the total, artifacts counted in one line; rejected
    artifacts past the rendering's :data:`~.card.MAX_ROWS` cards and invocations past its
    :data:`MAX_CALLS` counted in a line each, naming the slice that draws the next ones."""
    parts: list[Rendering] = []
    given = omitted = 0
    left_out: dict[str, list[int]] = {}  # what -> [how many, the index of the first]
    for given, item in enumerate(items, start=1):
        what = _past_its_bound(item, account)
        if what is not None:
            left_out.setdefault(what, [0, given - 1])[0] += 1
            continue  # counted in one line below, never drawn
        before = account.omitted
        part = _render(item, account)
        if isinstance(item, ArtifactLike) and account.omitted > before:
            omitted += 1  # counted once, in one line below, not a line per artifact
            continue
        parts.append(part)
    for what, (count, first) in left_out.items():
        more = more_listed(count, what, first, MAX_ROWS if what == " rejected" else MAX_CALLS)
        parts.append(account.count(note_rendering(more)))
    if omitted:
        parts.append(omitted_rendering(omitted, account.budget))
    text = "\n".join([f"gallery · {given} items", *(p.text for p in parts)])
    html = "".join(['<div class="murmur-gallery">', *(p.html for p in parts), "</div>"])
    return Rendering(primitive="gallery", text=text, html=html, parts=tuple(parts))


def render_file(
    path: str | os.PathLike[str],
    media_type: str | None = None,
    presentation: str | None = None,
    *,
    budget: RenderBudget | None = None,
) -> Rendering:
    """Render any local file as an artifact would be, computing its size and digest.

    Parameters
    ----------
    path
        The file. JSON lists of image paths (grids, slides) are resolved against its folder;
        each listed image is opened beneath it without following a link (a link is refused).
    media_type
        Its media type; guessed from the file name when ``None``.
    presentation
        A presentation hint, as a module would give it.
    budget
        Size limits; :class:`RenderBudget` defaults when ``None``.

    Raises
    ------
    FileNotFoundError
        ``path`` is not an existing regular file.
    TypeError
        ``media_type`` or ``presentation`` is not a str (or None), or ``budget`` not a
        :class:`RenderBudget` (or None).
    """
    _optional_str("render_file", "media_type", media_type, "text/csv", "to guess it from the name")
    _optional_str(
        "render_file", "presentation", presentation, "table", "to let the media type decide"
    )
    budget = _budget("render_file", budget)
    file = Path(path).expanduser().absolute()
    if not file.is_file():
        raise FileNotFoundError(f"render_file: {os.fspath(path)!r} is not an existing file")
    source = Source(
        id=file.name,
        title=file.name,
        media_type=normalize_media_type(media_type or guess_media_type(file)),
        bytes=file.stat().st_size,
        digest=file_digest(file),
        file=file,
        rel_path=file.name,
        root_dir=file.parent,
    )
    with drawing_clock(budget.draw_s):
        part = Account(budget).render(source, presentation or "", verify=False)
    return part or omitted_rendering(1, budget)

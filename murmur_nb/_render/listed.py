"""Images a JSON artifact lists (a grid, slides): opened like artifacts, never by path.

The JSON artifact itself is verified (:mod:`.verify`), but the paths inside it are the
module's too, so each listed image is held to the same rules as an artifact's file:

* **Beneath the root, no link followed.** The path is normalized lexically (``a/./b``,
  ``a/../b``); one that climbs out of the root is refused without touching the file
  system. The rest is opened one component at a time from the root's canonical path with
  :func:`~murmur_nb._files.beneath.open_beneath`, so a component that is a link, or
  becomes one while the walk runs, fails the open instead of leading elsewhere.
* **Checked, then read from that descriptor.** ``fstat`` must show a regular file with
  one hard link (a second link may be a file outside the root) and at most the decode
  budget; the image is then read through the held descriptor (``/proc/self/fd/N``), so
  swapping the path afterwards changes nothing that is shown.
* **Refused, not raised.** Every problem becomes the tile's reason; nothing is read.
* **As many as are shown.** Only the first entries a grid or a strip shows
  (``RenderBudget.grid_images``, ``RenderBudget.max_slides``) are read and opened; the rest
  are counted. A 2 MB list of 400,000 paths took 742 MiB and 7 s when each was opened and
  given a cell.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from murmur_nb._files.beneath import one_file_problem, open_beneath, proc_path
from murmur_nb._render.core import CannotRender, clipped, format_size
from murmur_nb._render.inputs import guess_media_type

__all__ = ["TOO_MANY", "ListedImage", "listed_paths", "open_listed"]

#: The reason of an image past the number of descriptors one grid may hold.
TOO_MANY = "not drawn: too many images open at once"

_LINK = "refused: a symbolic link (links are not followed)"
_NOT_A_FOLDER = "refused: a link or a file where a folder should be"


@dataclass(frozen=True)
class ListedImage:
    """One listed image: ``file`` reads the verified descriptor, or ``problem`` says why not."""

    label: str
    file: Path | None
    media_type: str
    problem: str | None = None


def listed_paths(value: Any, keep: int) -> tuple[list[tuple[str, str]], int]:
    """The first ``keep`` ``(label, path)`` of a JSON list of image paths (strings or
    ``{"path", "title"}``), and how many it lists; a label is :func:`~.core.clipped`.

    A ``{"images": [...]}`` object is accepted too. Raises :class:`CannotRender` when the
    value is not such a list. Entries past ``keep`` are counted, never read: a list of
    millions costs no more than its first ``keep``.
    """
    if isinstance(value, dict) and isinstance(value.get("images"), list):
        value = value["images"]
    if not isinstance(value, list) or not value:
        raise CannotRender("not a JSON list of image paths")
    out: list[tuple[str, str]] = []
    for i, item in enumerate(value[:keep]):
        if isinstance(item, str):
            out.append((clipped(item), item))
        elif isinstance(item, dict) and isinstance(item.get("path"), str):
            out.append((clipped(str(item.get("title") or item["path"])), item["path"]))
        else:
            raise CannotRender(f"entry {i} is neither a path string nor an object with 'path'")
    return out, len(value)


def _open_error(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "missing"
    if exc.errno == errno.ELOOP:
        return _LINK
    if exc.errno == errno.ENOTDIR:
        return _NOT_A_FOLDER
    return f"unreadable ({exc.strerror or exc.__class__.__name__})"


def _lexical_problem(rel: str) -> str | None:
    """Why ``rel`` is refused before the file system is touched (absolute, climbs out)."""
    if rel.startswith(("/", "\\")) or Path(rel).is_absolute():
        return "absolute path refused"
    norm = posixpath.normpath(rel)
    if norm == ".." or norm.startswith("../"):
        return "outside the root"
    if norm == ".":
        return "refused: it is not a regular file"
    return None


def _fstat_problem(st: os.stat_result, max_bytes: int) -> str | None:
    problem = one_file_problem(st)
    if problem is not None:
        return f"refused: it {problem}"
    if st.st_size > max_bytes:
        return (
            f"refused: {format_size(st.st_size)} is too large to thumbnail "
            "(RenderBudget.parse_bytes)"
        )
    return None


def _open_one(real_root: str, rel: str, max_bytes: int) -> int | str:
    """A checked descriptor of ``rel`` beneath ``real_root``, or the reason it is refused."""
    problem = _lexical_problem(rel)
    if problem is not None:
        return problem
    try:
        fd = open_beneath(real_root, posixpath.normpath(rel))
    except OSError as exc:
        return _open_error(exc)
    except ValueError:  # an embedded NUL byte
        return "refused: not a valid path"
    problem = _fstat_problem(os.fstat(fd), max_bytes)
    if problem is not None:
        os.close(fd)
        return problem
    return fd


def open_listed(
    entries: list[tuple[str, str]],
    root: Path | None,
    *,
    max_bytes: int,
    keep: int,
    held: contextlib.ExitStack,
) -> list[ListedImage]:
    """Each entry opened and checked beneath ``root``; descriptors stay open until ``held``
    closes. At most ``keep`` are held; the images past them are listed as :data:`TOO_MANY`.
    """
    real_root = os.path.realpath(root) if root is not None else None
    out: list[ListedImage] = []
    opened_count = 0
    for label, rel in entries:
        media_type = guess_media_type(Path(rel))
        if real_root is None:
            out.append(ListedImage(label, None, media_type, "root unknown"))
            continue
        if opened_count >= keep:
            out.append(ListedImage(label, None, media_type, TOO_MANY))
            continue
        opened = _open_one(real_root, rel, max_bytes)
        if isinstance(opened, str):
            out.append(ListedImage(label, None, media_type, opened))
            continue
        held.callback(os.close, opened)
        opened_count += 1
        out.append(ListedImage(label, Path(proc_path(opened)), media_type))
    return out

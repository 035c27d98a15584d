"""Where a download link points: a data URI, a file written beside the notebook, or the file.

JupyterLab sanitizes the HTML of a notebook it does not trust (one opened, not run, by this
reader): ``href="data:..."`` is removed, a relative ``href`` is kept and resolved against the
notebook's folder. So by default a small download is embedded as a data URI (a notebook
someone ran reads it anywhere), and with :attr:`RenderBudget.download_dir` it is copied into
that folder under a name made from its digest and linked relatively: a committed notebook and
its folder then offer the download to anyone, trusted or not, in nbconvert HTML too. The
copy gets the mode any new file of the kernel gets (``0666`` less its umask): who may read it
is the kernel's account's choice, as for the notebook beside it (it was ``0644`` whatever the
umask, so a kernel with umask ``077`` left its downloads readable by every account).

A file larger than :attr:`RenderBudget.embed_bytes` is not embedded; neither is one that no
longer fits what the rendering has left of :attr:`RenderBudget.total_bytes` (with a note
naming it). Such a file is linked where it is only when a relative link would open: it is
under :attr:`RenderBudget.link_base` (the working directory, which Jupyter serves). An
artifact is usually in the host's run folder under ``/tmp``: outside what Jupyter serves,
and removed when the host closes. With ``download_dir`` it is copied there and the copy is
linked; without, no link is drawn (a dead player is worse than none) and the note says its
size, which budget kept it out, and how to show it (:func:`place`). Media players and
download links take the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from murmur_nb._render.core import (
    RenderBudget,
    Source,
    embedded,
    link_to,
    linked_reason,
    not_linked_note,
    servable,
)
from murmur_nb._render.verify import file_digest

__all__ = ["DownloadDirError", "Offer", "file_name", "linked", "offer", "place"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CHUNK = 1024 * 1024


class DownloadDirError(OSError):
    """The download could not be written into :attr:`RenderBudget.download_dir`."""


@dataclass(frozen=True)
class Offer:
    """A file's address and, for the plain-text summary, how it is offered."""

    #: a data URI or a relative address; ``""`` when the file cannot be offered (see ``note``)
    url: str
    #: ``embedded``, ``written to <folder>``, ``linked ...`` or ``not shown ...``
    how: str
    #: a note for the card when a budget the reader may raise decided (the rendering's total,
    #: or the embed budget of a file that cannot be linked)
    note: str = ""

    @property
    def embedded(self) -> bool:
        return self.how == "embedded"


def _folder(budget: RenderBudget) -> Path:
    assert budget.download_dir is not None
    folder = Path(budget.download_dir).expanduser()
    if not folder.is_absolute():
        folder = (budget.link_base if budget.link_base is not None else Path.cwd()) / folder
    return folder


def file_name(source: Source) -> str:
    """``<16 hex digits of the digest>-<name>``: one file per content, a readable name."""
    hexpart = source.digest.partition(":")[2] or source.digest
    name = _UNSAFE.sub("_", source.name).strip("._")[:80] or "download"
    return f"{hexpart[:16]}-{name}"


def _same(path: Path, size: int, digest: str) -> bool:
    """Whether ``path`` already holds exactly this content (so it is not written again)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size != size:
            return False
        return file_digest(path) == digest
    except OSError:
        return False


def _new_file(folder: Path) -> tuple[int, Path]:
    """A new ``.part-*`` file in ``folder``, open for writing, with the mode a plain
    ``open(path, "w")`` gives (``0666`` less the umask), not ``mkstemp``'s ``0600``."""
    while True:
        tmp = folder / f".part-{secrets.token_hex(8)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def _write(source: Source, src: BinaryIO, target: Path) -> None:
    """Copy the declared bytes of ``src`` to ``target`` atomically, checking the digest."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_file(target.parent)
    try:
        hasher = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            left = source.bytes
            while left > 0 and (chunk := src.read(min(_CHUNK, left))):
                hasher.update(chunk)
                out.write(chunk)
                left -= len(chunk)
        if f"sha256:{hasher.hexdigest()}" != source.digest:
            raise DownloadDirError(
                f"{source.rel_path} changed since it was verified; not written to {target.parent}"
            )
        tmp.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def offer(source: Source, budget: RenderBudget) -> Offer:
    """How to offer ``source`` for download under ``budget``: written into ``download_dir``
    when it is set and the file fits ``embed_bytes``, else as :func:`place` says.

    Raises ``OSError`` when the file cannot be read or ``download_dir`` cannot be written.
    """
    if budget.download_dir is None or source.bytes > budget.embed_bytes:
        return place(source, budget)
    return _copied(source, budget, "")


def place(source: Source, budget: RenderBudget) -> Offer:
    """Where a player, an image or a link finds ``source``: embedded when it fits the
    budget, else :func:`linked`.

    Raises ``OSError`` when the file cannot be read or ``download_dir`` cannot be written.
    """
    url = embedded(source, budget)
    if url is not None:
        return Offer(url, "embedded")
    return linked(source, budget)


def linked(source: Source, budget: RenderBudget) -> Offer:
    """``source`` not embedded: linked where it is when a relative link opens (it is under
    the link base), else its copy in ``download_dir`` linked, else not offered at all
    (``url`` empty) with a note saying how to show it.

    Raises ``OSError`` when ``download_dir`` cannot be written.
    """
    reason = linked_reason(source, budget)
    over_total = source.bytes <= budget.embed_bytes  # the rendering's total decided
    where = source.link or source.file
    if servable(where, budget):
        return Offer(link_to(where, budget), reason, reason if over_total else "")
    if budget.download_dir is not None:
        return _copied(source, budget, reason if over_total else "")
    how = "not shown, not linked: too large to embed, outside the folder Jupyter serves"
    if over_total:
        how = "not shown, not linked: past the total budget, outside the folder Jupyter serves"
    return Offer("", how, not_linked_note(source, budget))


def _copied(source: Source, budget: RenderBudget, note: str) -> Offer:
    """``source`` written into ``download_dir`` (unless it holds it already), linked there."""
    target = _folder(budget) / file_name(source)
    if not _same(target, source.bytes, source.digest):
        with source.file.open("rb") as src:  # failing to read is not the folder's fault
            try:
                _write(source, src, target)
            except DownloadDirError:
                raise
            except OSError as exc:
                raise DownloadDirError(
                    f"writing {target.name} into {target.parent} failed "
                    f"({exc.strerror or exc}); set RenderBudget.download_dir to a writable "
                    "folder, or to None to embed downloads"
                ) from exc
    assert budget.download_dir is not None
    how = f"written to {Path(budget.download_dir).as_posix()}/"
    return Offer(link_to(target, budget), how, note)

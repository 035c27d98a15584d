"""A staged-file input: pick one of the session's files, or upload one; never type a path.

A request property that is an object of exactly ``root`` and ``path`` strings names a file
the host hands the module (``StagedArtifact.ref()``). The picker offers the artifacts staged
or produced (verified) in this session, with a thumbnail for images, and a ``FileUpload``.
Choosing a verified artifact stages it with ``host.stage``; an upload is hashed and staged
the same way. The chosen staged artifact is what the form hands to ``invoke(staged=...)``.

A file that cannot be used when chosen or uploaded (gone with the host whose run made it,
changed since it was verified, or not staged: a root kernel's artifact store that another
account could change the way to is refused with a ``ValueError``) is refused there: the
reason is shown beside the field and the choice goes back to none, so the dropdown,
:attr:`FilePicker.staged` and the form's value agree. The dropdown is named for screen
readers by its tooltip (the field's visible label is a separate HTML widget, so a
``description`` would print the name twice). An upload is stored under a name of safe
characters; its label keeps the name the person's file had.
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as w

from murmur_nb._exceptions import ModuleHostError
from murmur_nb._files.artifacts import VerifiedArtifact
from murmur_nb._files.scratch import temp_folder
from murmur_nb._forms.form import quoted
from murmur_nb._modules.staging import StagedArtifact
from murmur_nb._render.core import format_size
from murmur_nb._rules import clipped, printable
from murmur_nb.widgets._html import FG_MUTED, esc

__all__ = ["FilePicker", "is_file_ref"]

_NONE = "— choose a file —"
_HINT = "choose a file staged or produced in this session, or upload one"
_THUMB_MAX_BYTES = 2 << 20
#: what staging and showing a file may refuse it with: the host's errors, the file system's,
#: and a root kernel's artifact store another account could change the way to (ValueError)
_REFUSED = (ModuleHostError, OSError, ValueError)


def is_file_ref(spec: Any) -> bool:
    """Whether a form field is a ``{root, path}`` file reference."""
    names = {c.path[-1] for c in getattr(spec, "children", ())}
    return (
        spec.kind == "object"
        and names == {"root", "path"}
        and all(c.kind == "string" for c in spec.children)
    )


def _name(item: Any) -> str:
    art = item.artifact if isinstance(item, StagedArtifact) else item
    return str(art.title or Path(art.path).name)


def _label(item: Any) -> str:
    """A file as its option reads: plain text, a module's words cut and their control
    characters and bidirectional overrides escaped (``invoice_\u202egnp.exe`` read as
    ``invoice_exe.png``)."""
    if isinstance(item, dict):
        return printable(f"{clipped(str(item.get('root')))}:{clipped(str(item.get('path')))}"
                         " · given in code")  # fmt: skip
    art = item.artifact if isinstance(item, StagedArtifact) else item
    where = "staged" if isinstance(item, StagedArtifact) else "verified"
    size = format_size(art.bytes)
    return printable(f"{clipped(_name(item))} · {clipped(art.media_type)} · {size} · {where}")


def _ref_of(ref: Any) -> dict[str, str]:
    """A ``{root, path}`` reference as given to :meth:`FilePicker.select_ref`, checked."""
    example = "{'root': 'staged', 'path': 'sha256/<hex>.png'}, as staged.ref() gives"
    if not isinstance(ref, Mapping):
        raise TypeError(
            f"a file input takes a reference to a file, a mapping such as {example}; "
            f"got {type(ref).__name__} {quoted(ref)}: stage the file with host.stage(artifact) "
            "and pass staged.ref()"
        )
    if set(ref) != {"root", "path"} or not all(isinstance(v, str) and v for v in ref.values()):
        raise ValueError(
            f"a file reference has exactly two non-empty strings, root and path, such as "
            f"{example}; got {quoted(dict(ref))}"
        )
    return {"root": ref["root"], "path": ref["path"]}


def _unusable(item: Any, exc: Exception) -> str:
    """Why a chosen file cannot be used, and what to do instead."""
    if getattr(exc, "code", "") == "missing_file" or isinstance(exc, FileNotFoundError):
        return (
            f"the file of {_name(item)!r} is gone (deleted, or removed with the host whose run "
            "made it): run that capability again, or upload the file"
        )
    if isinstance(exc, ValueError):  # the store is refused: no other file would stage either
        return f"{_name(item)!r} cannot be staged: {exc}"
    return f"{_name(item)!r} cannot be used: {exc}; choose another file or upload it"


def thumbnail(item: Any) -> str:
    """An ``<img>`` of an image file (a data URI, so it shows offline too), else ``""``."""
    file = Path(item.file)
    if not item.media_type.startswith("image/") or item.bytes > _THUMB_MAX_BYTES:
        return ""
    data = base64.b64encode(file.read_bytes()).decode()
    return (
        f'<img class="murmur-thumb" alt="{esc(_label(item))}" '
        f'src="data:{esc(item.media_type)};base64,{data}" style="max-height:64px;max-width:96px">'
    )


class FilePicker:
    """One file input of a :class:`CapabilityForm`.

    ``name`` is the field's accessible name (the form words it as it does every field's);
    the dropdown's tooltip starts with it, which is what a screen reader announces.

    Attributes
    ----------
    choice : ipywidgets.Dropdown
        The session's files (staged and verified); ``-1`` is none.
    upload : ipywidgets.FileUpload
    preview : ipywidgets.HTML
        The chosen file: thumbnail for an image, its name, type and size.
    staged : StagedArtifact or None
        The chosen file, staged.
    error : str
        Why the file last chosen could not be used (shown beside the field), or ``""``.
    """

    def __init__(
        self,
        host: Any,
        candidates: Sequence[Any],
        on_change: Callable[[FilePicker], None],
        *,
        name: str = "",
    ) -> None:
        self.host = host
        self.candidates: list[Any] = []
        self.staged: StagedArtifact | None = None
        self.error = ""
        self._on_change = on_change
        self.choice = w.Dropdown(
            options=[(_NONE, -1)], value=-1, layout=w.Layout(width="auto"),
            tooltip=f"{name} — {_HINT}" if name else _HINT,
        )  # fmt: skip
        self.upload = w.FileUpload(description="Upload", multiple=False, accept="")
        self.preview = w.HTML()
        self.error_view = w.HTML()
        self.widget = self.choice
        for item in candidates:
            self.add(item)
        self.choice.observe(lambda _c: self._chosen(), names="value")
        self.upload.observe(lambda _c: self._uploaded(), names="value")
        self.box = w.VBox([w.HBox([self.choice, self.upload]), self.preview])

    def add(self, item: Any) -> int:
        """Offer a staged or verified artifact (once per content); returns its option."""
        for i, known in enumerate(self.candidates):
            if getattr(known, "digest", None) == item.digest:
                return i
        self.candidates.append(item)
        self.choice.options = [*self.choice.options, (_label(item), len(self.candidates) - 1)]
        return len(self.candidates) - 1

    def select_ref(self, ref: Any) -> None:
        """Choose the offered file whose ``ref()`` is ``ref`` (as ``values=`` gives it).

        Raises TypeError when ``ref`` is not a mapping (a path or a name: files are never
        typed) and ValueError when it is not exactly ``{"root": ..., "path": ...}``.
        """
        ref = _ref_of(ref)
        for i, item in enumerate(self.candidates):
            if isinstance(item, StagedArtifact) and item.ref() == ref:
                self.choice.value = i
                return
        # a reference the session does not know (a file in another root): offered as given
        self.candidates.append(ref)
        self.choice.options = [*self.choice.options, (_label(ref), len(self.candidates) - 1)]
        self.choice.value = len(self.candidates) - 1

    def _chosen(self) -> None:
        index = self.choice.value
        item = None if index == -1 else self.candidates[index]
        if item is None or isinstance(item, dict):
            self.staged, self.error, self.preview.value = None, "", ""
        else:
            self._take(item)
        self._on_change(self)

    def _take(self, item: Any) -> None:
        """Stage a chosen artifact and show it (from the staged copy, which a consumer
        reads); one that cannot be used is refused beside the field, and none is chosen."""
        try:
            staged = item if isinstance(item, StagedArtifact) else self.host.stage(item)
            Path(staged.file).stat()  # a staged copy removed since: gone too
            picture = thumbnail(staged)
        except _REFUSED as exc:
            self._refuse(_unusable(item, exc))
            return
        self.staged, self.error = staged, ""
        self.preview.value = (
            f'<div style="display:flex;gap:8px;align-items:center">{picture}'
            f'<small style="color:{FG_MUTED}">{esc(_label(item))}</small></div>'
        )

    def _uploaded(self) -> None:
        files = list(self.upload.value or ())
        if not files:
            return
        got = files[0]
        content = bytes(got["content"])
        given = str(got.get("name") or "upload")
        name = re.sub(r"[^A-Za-z0-9._-]", "_", given)  # stored: safe characters only
        title = " ".join(given.split()) or name  # shown: the person's name, on one line
        media = str(got.get("type") or "") or mimetypes.guess_type(name)[0]
        with tempfile.TemporaryDirectory(prefix="murmur-upload-", dir=temp_folder()) as folder:
            file = Path(folder) / name
            file.write_bytes(content)
            artifact = VerifiedArtifact(
                id=f"upload-{name}", kind="upload", path=name, root="upload",
                media_type=media or "application/octet-stream", bytes=len(content),
                digest="sha256:" + hashlib.sha256(content).hexdigest(), title=title, file=file,
            )  # fmt: skip
            try:
                staged, error = self.host.stage(artifact), ""
            except _REFUSED as exc:
                staged, error = None, _unusable(artifact, exc)
        self.upload.value = ()
        if staged is None:
            self._refuse(error)
            self._on_change(self)  # shown beside the field, as a refused choice is
            return
        self.choice.value = self.add(staged)

    def _refuse(self, error: str) -> None:
        """None chosen, and ``error`` said beside the field (by the form's ``on_change``)."""
        self.choice.value = -1  # runs _chosen again when a file was chosen: no error
        self.error = error

    def ref(self) -> dict[str, Any] | None:
        """The chosen file as ``{root, path}``, or ``None``."""
        index = self.choice.value
        if index != -1 and isinstance(self.candidates[index], dict):
            return dict(self.candidates[index])
        return self.staged.ref() if self.staged is not None else None

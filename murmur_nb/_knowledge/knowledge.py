"""Skills and agent overlays: listed, loaded on demand, verified by digest, budgeted, audited.

A module ships ``Descriptor.Skills`` (loaded for the capability in play) and
``AgentOverlays`` (instructions the host may fold into an agent), each with a path, a digest
and a token estimate (seed 004); the host methods (``skills``, ``load_skill``, ``skills_for``,
``agent_listing``, ...) delegate here. Every load opens the file beneath the module folder
(links inside followed, none out: ``open_beneath(..., inner_links=True)``), reads it once and
returns it only when its SHA-256 equals the digest of the descriptor the host holds.
:func:`select_skills` picks by declared ``tokens`` before reading (first fit; no estimate, no
pick under a budget). An unknown skill id warns (:func:`knowledge_warnings`,
:class:`KnowledgeWarning`) rather than refusing the module: SPEC §1 does not list it. Every
load is audited, refused ones too (:class:`KnowledgeLog`).
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from murmur_nb._exceptions import (
    ArtifactRejected,
    ConfinementViolation,
    DescriptorProblem,
    DigestMismatch,
    InvalidInput,
    ModuleHostError,
    ModuleNotFound,
    ProtocolViolation,
)
from murmur_nb._files.beneath import Outside, open_beneath, read_at_most
from murmur_nb._render.card import MAX_ROWS, first_rows, said
from murmur_nb._render.core import Body, RenderBudget, Rendering, card, esc, short_digest
from murmur_nb._render.primitives.text import markdown_block
from murmur_nb._rules import DIGEST_RE, NotReadable, clipped
from murmur_nb.protocol import Capability, Descriptor, Overlay, Skill

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "KnowledgeDocument",
    "KnowledgeLog",
    "KnowledgeWarning",
    "LeftOut",
    "SkillSelection",
    "find_document",
    "knowledge_warnings",
    "load_document",
    "read_verified",
    "select_skills",
    "warn_about",
]

#: Largest skill or overlay the host reads; a concise instruction document is far smaller.
MAX_DOCUMENT_BYTES = 1024 * 1024

Kind = Literal["skill", "overlay"]


class KnowledgeWarning(UserWarning):
    """A module's skills or overlays are declared in a way the host works around.

    An unknown skill id listed by a capability, a duplicate id, or a token estimate that
    is not positive. The module is still accepted (see the module notes for why).
    """


@dataclass(frozen=True)
class KnowledgeDocument:
    """A skill or overlay whose bytes passed verification, with its provenance.

    Attributes
    ----------
    kind
        ``"skill"`` or ``"overlay"``.
    module, id, path, digest, tokens
        Where it came from: the module, the document's id, its path relative to the module
        folder, the declared (and verified) ``sha256:`` digest, the declared token estimate.
    title, summary
        As declared (overlays have no summary).
    text
        The verified content, decoded as UTF-8 (undecodable bytes replaced).
    size
        Bytes read and hashed.
    """

    kind: Kind
    module: str
    id: str
    title: str
    summary: str
    path: str
    digest: str
    tokens: int
    text: str
    size: int

    def provenance(self) -> str:
        """One stable line: kind, id, module/path, declared tokens, short digest."""
        return (
            f"{self.kind} {self.id} · {self.module}/{self.path} · {self.tokens} tokens · "
            f"{short_digest(self.digest)}"
        )

    def render(self, budget: RenderBudget | None = None) -> Rendering:
        """The text through the same Markdown primitive as artifacts, digest in the header.

        Rendered from the verified bytes in memory, never from the file again; past
        ``budget.text_bytes`` the text is cut, as a Markdown artifact would be.
        """
        budget = budget or RenderBudget()
        data = self.text.encode()
        cut = len(data) > budget.text_bytes
        shown = data[: budget.text_bytes].decode("utf-8", errors="ignore") if cut else self.text
        html, _ = markdown_block(shown)
        notes = [f"showing the first {budget.text_bytes} bytes of {len(data)}"] if cut else []
        provenance = (
            f'<div class="murmur-provenance" style="font-size:12px;color:#57606a">'
            f"{esc(self.kind)} <code>{esc(self.id)}</code> · module <code>{esc(self.module)}"
            f"</code> · <code>{esc(self.path)}</code> · {self.tokens} tokens declared · "
            f'verified <code class="murmur-digest">{esc(self.digest)}</code></div>'
        )
        body = Body(html=provenance + html, notes=notes)
        title = self.title or self.id
        framed = card(
            "markdown", body, title=title, media_type="text/markdown", size=self.size,
            digest=self.digest,
        )  # fmt: skip
        html_out = (
            f'<div class="murmur-knowledge" data-kind="{esc(self.kind)}" '
            f'data-id="{esc(self.id)}">{framed}</div>'
        )
        return Rendering(primitive="markdown", text=self.provenance(), html=html_out)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.render()._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return self.provenance()


@dataclass(frozen=True)
class LeftOut:
    """A skill ``skills_for`` did not fold in, and why.

    ``reason`` is ``budget`` (did not fit), ``unknown_skill`` (the capability lists an id
    the module does not declare), ``no_estimate`` (no positive ``tokens`` under a budget),
    or the error code of a refused load (``digest_mismatch``, ``confinement_violation``,
    ``protocol_violation``).
    """

    id: str
    tokens: int
    reason: str
    message: str


_BUDGET_REASONS = frozenset({"budget", "unknown_skill", "no_estimate"})


@dataclass(frozen=True)
class SkillSelection:
    """The skills loaded for one capability within a token budget, and those left out."""

    capability: str
    budget_tokens: int | None
    documents: tuple[KnowledgeDocument, ...]
    left_out: tuple[LeftOut, ...]

    @property
    def used_tokens(self) -> int:
        """Declared tokens of the loaded documents."""
        return sum(d.tokens for d in self.documents)

    @property
    def refused(self) -> tuple[LeftOut, ...]:
        """The skills whose load was refused (digest or confinement), not merely skipped."""
        return tuple(x for x in self.left_out if x.reason not in _BUDGET_REASONS)

    def summary(self) -> str:
        """Stable plain text: what was loaded, what was left out and why (the first
        ``first_rows`` of each, and a line counting the others)."""
        budget = "no budget" if self.budget_tokens is None else f"budget {self.budget_tokens}"
        lines = [
            f"skills for {clipped(self.capability)} · {budget} · {len(self.documents)} loaded, "
            f"{self.used_tokens} tokens"
        ]
        lines += [f"  + {line}" for line in first_rows(
            self.documents, lambda d: said(d.provenance()), "SkillSelection.documents")]
        lines += [f"  - {line}" for line in first_rows(
            self.left_out, lambda x: f"{clipped(x.id)} ({x.tokens} tokens): {clipped(x.reason)}",
            "SkillSelection.left_out")]  # fmt: skip
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        items = "".join(f"<li>{esc(line)}</li>" for line in first_rows(
            self.left_out, lambda x: f"{clipped(x.id)}: {said(x.message)}",
            "SkillSelection.left_out"))  # fmt: skip
        shown = self.documents[:MAX_ROWS]
        more = first_rows(self.documents, str, "SkillSelection.documents")[len(shown):]
        html = (
            f"<div><b>{esc(self.summary().splitlines()[0])}</b></div>"
            + "".join(d.render().html for d in shown)
            + "".join(f"<div>{esc(line)}</div>" for line in more)
            + (f"<div>Left out:<ul>{items}</ul></div>" if items else "")
        )
        return {"text/plain": self.summary(), "text/html": html}


class KnowledgeLog:
    """Thread-safe record of every skill and overlay load, refused ones included."""

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(
        self,
        module: str,
        kind: Kind,
        entry: Skill | Overlay,
        *,
        capability: str,
        outcome: str,
        size: int | None = None,
        message: str = "",
    ) -> None:
        row = {
            "time": datetime.now(UTC),
            "module": module,
            "kind": kind,
            "id": entry.id,
            "path": entry.path,
            "capability": capability or None,
            "digest": entry.digest,
            "tokens": entry.tokens,
            "bytes": size,
            "outcome": outcome,
            "message": message,
        }
        with self._lock:
            self._rows.append(row)

    def frame(self) -> pd.DataFrame:
        """One row per load, oldest first (see :meth:`ModuleHost.knowledge_audit`)."""
        with self._lock:
            rows = [dict(r) for r in self._rows]
        return knowledge_frame(rows)


KNOWLEDGE_COLUMNS = [
    "time",
    "module",
    "kind",
    "id",
    "path",
    "capability",
    "digest",
    "tokens",
    "bytes",
    "outcome",
    "message",
]


def knowledge_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The skill and overlay loads as a DataFrame; ``bytes`` is ``<NA>`` for a refused load."""
    import pandas as pd  # noqa: PLC0415 - heavy; imported on first use

    frame = pd.DataFrame(rows, columns=KNOWLEDGE_COLUMNS)
    frame["time"] = pd.to_datetime(frame["time"], utc=True)
    frame["tokens"] = frame["tokens"].astype("int64")
    frame["bytes"] = pd.array([row["bytes"] for row in rows], dtype="Int64")
    return frame


# -- verified reading -----------------------------------------------------------------


def read_verified(folder: Path, entry: Skill | Overlay, label: str) -> bytes:
    """The bytes of ``entry``'s file, only if confined, regular and matching its digest."""
    if not DIGEST_RE.fullmatch(entry.digest):
        raise DigestMismatch(
            f"{label} declares digest {entry.digest!r}, not 'sha256:' + 64 lowercase hex "
            "digits; nothing was loaded. Fix the module's descriptor",
            artifact_id=entry.id,
        )
    if not entry.path or "\x00" in entry.path or entry.path.startswith(("/", "\\")):
        raise ConfinementViolation(
            f"{label} is refused: its path must be relative to the module folder; nothing "
            "was loaded. Fix the module's descriptor",
            artifact_id=entry.id,
        )
    try:
        fd = open_beneath(folder, entry.path, inner_links=True)
    except Outside as exc:
        raise ConfinementViolation(
            f"{label} is refused: {exc}; only files inside the module folder are loaded, "
            "nothing was. Put the file itself in the module folder",
            artifact_id=entry.id,
        ) from exc
    except NotReadable as exc:
        raise ConfinementViolation(
            f"{label} is not a regular file ({exc}); nothing was opened or loaded. Put the "
            "document itself in the module folder, or fix the path in the module's descriptor",
            artifact_id=entry.id,
        ) from exc
    except FileNotFoundError as exc:
        raise ArtifactRejected(
            f"{label}: there is no file {entry.path!r} in the module folder; nothing was "
            "loaded. Add the file, or fix the path in the module's descriptor",
            artifact_id=entry.id,
            code="missing_file",
        ) from exc
    except OSError as exc:
        raise ConfinementViolation(
            f"{label} cannot be opened beneath the module folder ({exc.strerror or exc}); "
            "nothing was loaded. Reinstall the module or fix its descriptor",
            artifact_id=entry.id,
        ) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfinementViolation(
                f"{label} is not a regular file; nothing was loaded", artifact_id=entry.id
            )
        data = read_at_most(fd, MAX_DOCUMENT_BYTES)
    finally:
        os.close(fd)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ProtocolViolation(
            f"{label} is larger than {MAX_DOCUMENT_BYTES} bytes; skills and overlays are "
            "concise documents, and this one was not loaded. Split or shorten it",
            rule="knowledge_size",
        )
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != entry.digest:
        raise DigestMismatch(
            f"{label} declares {entry.digest} but its content hashes to {actual}: the file "
            "is not the one the module declared, and nothing was loaded. Reinstall the "
            "module, or update its descriptor and describe it again",
            artifact_id=entry.id,
        )
    return data


# -- loading and budgeting -------------------------------------------------------------


def find_document(descriptor: Descriptor, kind: Kind, doc_id: str) -> Skill | Overlay:
    """The declared skill or overlay ``doc_id`` of ``descriptor``; ``ModuleNotFound`` else."""
    entries: Sequence[Skill | Overlay] = (
        descriptor.skills or [] if kind == "skill" else descriptor.agent_overlays or []
    )
    for entry in entries:
        if entry.id == doc_id:
            return entry
    known = ", ".join(e.id for e in entries) or "none"
    raise ModuleNotFound(
        f"module {descriptor.module!r} declares no {kind} {doc_id!r} (it declares: {known}); "
        f"host.{kind}s({descriptor.module!r}) lists them"
    )


def load_document(
    folder: Path,
    module_id: str,
    kind: Kind,
    entry: Skill | Overlay,
    log: KnowledgeLog,
    *,
    capability: str = "",
) -> KnowledgeDocument:
    """Verify and read one declared document, and audit the load whatever its outcome.

    Raises
    ------
    ConfinementViolation, DigestMismatch, ProtocolViolation
        Nothing was returned; the audit row carries the code.
    """
    label = f"{kind} {entry.id!r} of module {module_id!r} ({entry.path})"
    try:
        data = read_verified(folder, entry, label)
    except ModuleHostError as exc:
        log.record(
            module_id, kind, entry, capability=capability, outcome=exc.code, message=exc.message
        )
        raise
    log.record(module_id, kind, entry, capability=capability, outcome="ok", size=len(data))
    return KnowledgeDocument(
        kind=kind,
        module=module_id,
        id=entry.id,
        title=entry.title,
        summary=getattr(entry, "summary", ""),
        path=entry.path,
        digest=entry.digest,
        tokens=entry.tokens,
        text=data.decode("utf-8", errors="replace"),
        size=len(data),
    )


def select_skills(
    folder: Path,
    descriptor: Descriptor,
    capability: Capability,
    budget_tokens: int | None,
    log: KnowledgeLog,
) -> SkillSelection:
    """Load ``capability``'s skills in its order, first fit within ``budget_tokens``."""
    if budget_tokens is not None and (
        not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens < 0
    ):
        raise InvalidInput(
            f"budget_tokens must be a non-negative integer or None, got {budget_tokens!r}"
        )
    module_id = descriptor.module
    declared = {s.id: s for s in descriptor.skills or []}
    docs: list[KnowledgeDocument] = []
    left: list[LeftOut] = []
    used = 0
    for skill_id in dict.fromkeys(capability.skills or []):
        skill = declared.get(skill_id)
        if skill is None:
            left.append(LeftOut(skill_id, 0, "unknown_skill", _unknown(capability, skill_id)))
            continue
        if budget_tokens is not None and skill.tokens <= 0:
            left.append(
                LeftOut(skill_id, skill.tokens, "no_estimate",
                        f"declares tokens={skill.tokens}, so it cannot be budgeted")
            )  # fmt: skip
            continue
        if budget_tokens is not None and used + skill.tokens > budget_tokens:
            left.append(
                LeftOut(skill_id, skill.tokens, "budget",
                        f"needs {skill.tokens} tokens; {budget_tokens - used} of "
                        f"{budget_tokens} were left")
            )  # fmt: skip
            continue
        try:
            doc = load_document(folder, module_id, "skill", skill, log, capability=capability.id)
        except (ConfinementViolation, DigestMismatch, ProtocolViolation) as exc:
            left.append(LeftOut(skill_id, skill.tokens, exc.code, exc.message))
            continue
        docs.append(doc)
        used += max(skill.tokens, 0)
    return SkillSelection(capability.id, budget_tokens, tuple(docs), tuple(left))


def _unknown(capability: Capability, skill_id: str) -> str:
    # cut: a problem per listed skill, each naming the capability, multiplies its id
    return (
        f"capability {clipped(capability.id)} lists skill {clipped(skill_id)!r}, which the "
        "module does not declare in skills; the module author should add it or drop the "
        "reference"
    )


# -- describe-time warnings ------------------------------------------------------------


def knowledge_warnings(descriptor: Descriptor) -> list[DescriptorProblem]:
    """What the host works around in a module's skills and overlays (never a refusal)."""
    problems: list[DescriptorProblem] = []
    lists: list[tuple[str, Sequence[Skill | Overlay]]] = [
        ("agent_overlays", descriptor.agent_overlays or []),
        ("skills", descriptor.skills or []),
    ]
    for list_name, entries in lists:
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            where = f"{list_name}[{i}]"
            if entry.id in seen:
                problems.append(
                    DescriptorProblem(
                        f"{where}.id",
                        f"duplicate id {entry.id!r} (also {list_name}[{seen[entry.id]}]); "
                        "the first is used",
                    )
                )
            seen.setdefault(entry.id, i)
            if entry.tokens <= 0:
                problems.append(
                    DescriptorProblem(
                        f"{where}.tokens",
                        f"is {entry.tokens}; give a positive estimate of its context cost, "
                        "or it is left out whenever a token budget applies",
                    )
                )
    skill_ids = {s.id for s in descriptor.skills or []}
    for i, cap in enumerate(descriptor.capabilities or []):
        for j, skill_id in enumerate(cap.skills or []):
            if skill_id not in skill_ids:
                problems.append(
                    DescriptorProblem(f"capabilities[{i}].skills[{j}]", _unknown(cap, skill_id))
                )
    return problems


def warn_about(module_id: str, problems: Iterable[DescriptorProblem]) -> None:
    """Issue one :class:`KnowledgeWarning` per problem, attributed to the caller's caller."""
    for problem in problems:
        warnings.warn(
            f"module {module_id!r} was accepted, but {problem}", KnowledgeWarning, stacklevel=3
        )

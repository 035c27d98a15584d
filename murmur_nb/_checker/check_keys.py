"""Descriptor keys the seed does not define, and whether describe printed a descriptor at all.

Design notes
------------
* **An unknown key is ignored, so a misspelt one is a field left at its default.** The host
  reads a descriptor as Go's decoder reads the seed's structs: a key no field names is
  dropped (SPEC §1 says nothing of other keys, so a module may carry its own). So
  ``"capabilites"`` leaves ``capabilities`` empty and every rule passes over no capability,
  ``"cost_know"`` leaves ``cost_known`` false and the capability needs approval. Each unknown
  key is a warning naming the field it was probably meant to be (:mod:`difflib` against the
  fields of its level: the describe envelope, the descriptor, a capability, its effects,
  the permissions, an overlay, a skill, a requirement), never a failure.
* **What the module printed, read once more.** The host keeps the validated model, not the
  output, so :func:`raw_describe` runs ``describe`` again the way the host does (the folder's
  verified snapshot, confined, within the describe deadline and output bound) and decodes
  it without validating. The same output says whether a refused descriptor was read at all
  (:func:`descriptor_read`): when it was, the host applied every describe rule and reported
  every breach, so the rules it did not name held.
* Artifact keys are in invoke envelopes, which the host does not keep either; they are not
  looked at here.
"""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from murmur_nb._exceptions import ModuleHostError, SandboxWarning
from murmur_nb._modules.catalog import stat_key
from murmur_nb._modules.gate import SandboxGate
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.snapshot import Refused, SnapshotStore
from murmur_nb._modules.workspace import Workspace
from murmur_nb._rules import clipped
from murmur_nb._sandbox import run_launched
from murmur_nb._schemas.descriptor import decode_describe
from murmur_nb.protocol import (
    Capability,
    Descriptor,
    Effects,
    Envelope,
    Overlay,
    Permissions,
    Requirement,
    Skill,
)

__all__ = ["UnknownKey", "descriptor_read", "raw_describe", "unknown_keys"]


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key the seed does not define: where (``capabilities[0].effects.cost_know``), at
    which level, and the field it is closest to (empty when none is close)."""

    path: str
    key: str
    level: str
    meant: str = ""

    @property
    def parent(self) -> str:
        """The path of the object holding the key (empty: the descriptor)."""
        return self.path.removesuffix(self.key).removesuffix(".")

    def words(self) -> str:
        """``unknown key 'cost_know' in capability effects (ignored); did you mean ...?``"""
        said = (f"unknown key {self.key!r} in the {self.level}: the host ignores it, as it "
                "ignores every key the modproto seed does not define")  # fmt: skip
        return said + (f"; did you mean {self.meant!r}?" if self.meant else "")


def raw_describe(folder: Path, policy: Policy) -> Any:
    """The describe envelope the module in ``folder`` prints, decoded but not validated;
    ``None`` when the run prints no one JSON document (the host's rows say why)."""
    store, gate, workspace = SnapshotStore(), SandboxGate(lambda: policy), Workspace(None)
    try:
        listing = list(stat_key(folder, policy))
        snap = store.snapshot(folder, listing, max_bytes=policy.max_module_bytes)
        exe = snap.path / "module"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SandboxWarning)  # the check's host said it once
            with workspace.cwd(in_sandbox=gate.makes_cwd) as cwd:
                run = run_launched(
                    gate.launch([str(exe), "describe"], cwd, snap.path, {}), b"", cwd=cwd,
                    deadline_s=policy.describe_deadline_ms / 1000.0,
                    max_output_bytes=policy.describe_max_output_bytes,
                )  # fmt: skip
    except (OSError, Refused, ModuleHostError):  # SandboxUnavailable too
        return None
    finally:
        workspace.close()
        gate.close()
    if run.timed_out or run.output_exceeded:
        return None
    try:
        return decode_describe(run.stdout)
    except (ValueError, UnicodeDecodeError):  # TooDeep too
        return None


def descriptor_read(envelope: Any) -> bool:
    """Whether ``envelope`` carries a descriptor the host could read (then it applied every
    describe rule to it)."""
    if not isinstance(envelope, dict) or envelope.get("ok") is not True:
        return False
    try:
        Descriptor.model_validate(envelope.get("result"))
    except PydanticValidationError:
        return False
    return True


def unknown_keys(envelope: Any) -> list[UnknownKey]:
    """Every key of the describe ``envelope`` and its descriptor that no field of its level
    names, in the order they appear."""
    if not isinstance(envelope, dict):
        return []
    found = _unknown(envelope, Envelope, "envelope.", "describe envelope")
    desc = envelope.get("result")
    if not isinstance(desc, dict):
        return found
    found += _unknown(desc, Descriptor, "", "descriptor")
    for i, cap in _objects(desc.get("capabilities")):
        found += _unknown(cap, Capability, f"capabilities[{i}].", "capability")
        if isinstance(cap.get("effects"), dict):
            found += _unknown(cap["effects"], Effects, f"capabilities[{i}].effects.",
                              "capability's effects")  # fmt: skip
    if isinstance(desc.get("permissions"), dict):
        found += _unknown(desc["permissions"], Permissions, "permissions.", "permissions")
    for field, model, level in _LISTS:
        for i, item in _objects(desc.get(field)):
            found += _unknown(item, model, f"{field}[{i}].", level)
    return found


_LISTS: tuple[tuple[str, type[BaseModel], str], ...] = (
    ("agent_overlays", Overlay, "agent overlay"),
    ("skills", Skill, "skill"),
    ("requirements", Requirement, "requirement"),
)


def _objects(value: Any) -> list[tuple[int, dict[str, Any]]]:
    return [(i, v) for i, v in enumerate(value) if isinstance(v, dict)] if isinstance(
        value, list) else []  # fmt: skip


def _unknown(data: dict[str, Any], model: type[BaseModel], prefix: str, level: str
             ) -> list[UnknownKey]:  # fmt: skip
    """The keys of ``data`` no field of ``model`` names, each cut to a label's length (a
    megabytes-long key, quoted in the row's path and detail, made a report of twice that)."""
    fields = list(model.model_fields)
    out = []
    for key in data:
        if key not in model.model_fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            shown = clipped(str(key))
            out.append(UnknownKey(f"{prefix}{shown}", shown, level, close[0] if close else ""))
    return out

"""Pydantic v2 models of the modproto v1 wire types.

The models follow the Go seed field for field, by its ``json:`` tags:

* a field tagged ``omitempty`` is left out of the output when it holds its zero value
  (``presentation``, ``title``, ``poll_capability``, ``result``, ``error``, ``detail``);
* every other field is always written, and a Go nil slice or map stays ``null``: ``None``
  and ``[]`` are kept distinct so a document round-trips exactly;
* ``estimated_cost`` / ``actual_cost`` are ``float | None``: ``null`` is *unknown*, ``0``
  is *free*, and the two never collapse;
* ``Request.extra`` is marshalled inline at the request root, and host-owned fields always
  win over an extra of the same name, "same" as a Go decoder matches keys: case-insensitively
  under Unicode simple folding (``Roots``; ``roots`` with U+017F for its s; see
  :mod:`._fold`). No serialization of a ``Request`` carries a key Go would decode into a
  host field;
* ``json.RawMessage`` fields (``input``, ``result``, the schema maps) hold any JSON value.

Unknown keys are ignored on input, as Go's ``encoding/json`` does: a module may send a
field this host does not know (``from_json``, ``model_validate``), and reading it must not
fail. A Python constructor is not input but code, though: ``Capability(request_shema="in")``
is a typo that would silently become ``request_schema=""``, so a keyword argument that names
no field is refused with a ``TypeError`` (as any Python call refuses one), suggesting the
field meant. Only the keywords are checked; a nested dict handed to a constructor is
validated as input, as pydantic does.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_serializer
from pydantic_core import PydanticSerializationError
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from murmur_nb.protocol._fold import shadowing_keys

__all__ = [
    "OPERATION_DESCRIBE",
    "OPERATION_INVOKE",
    "PROTOCOL_ID",
    "Artifact",
    "Capability",
    "Descriptor",
    "Effects",
    "Envelope",
    "Error",
    "Execution",
    "Grants",
    "Overlay",
    "Permissions",
    "Request",
    "Requirement",
    "Root",
    "Skill",
]

PROTOCOL_ID = "modproto.v1"
OPERATION_DESCRIBE = "describe"
OPERATION_INVOKE = "invoke"


class _Wire(BaseModel):
    """Base of every wire model: Go field names, ``omitempty`` honoured on output."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    def __init__(self, /, **data: Any) -> None:
        """Refuse a keyword that names no field (a typo), then build the model as pydantic
        does; decoding (``from_json``, ``model_validate``) never comes here."""
        unknown = [key for key in data if key not in type(self).model_fields]
        if unknown:
            raise TypeError(_unknown_keywords(type(self), unknown))
        super().__init__(**data)

    # pydantic calls a model's own __init__ while validating input (model_validate, a nested
    # model) unless it is marked as a base __init__, as pydantic's RootModel marks its own:
    # input keeps ignoring unknown keys
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    #: ``omitempty`` string fields: left out when ``""``.
    _omitempty: ClassVar[frozenset[str]] = frozenset()
    #: ``omitempty`` pointer / RawMessage fields: left out only when absent (``None``);
    #: a present ``0``, ``false`` or ``""`` JSON value is kept, as Go keeps it.
    _omitnil: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_empty(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in self._omitempty:
                if data.get(key) == "":
                    del data[key]
            for key in self._omitnil:
                if key in data and data[key] is None:
                    del data[key]
        return data

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """pydantic's ``model_dump``, except that a Ctrl-C (or an exit) landing in a
        serializer of this package comes out as itself: pydantic wraps whatever a Python
        serializer raises, ``KeyboardInterrupt`` too, in a ``PydanticSerializationError``."""
        try:
            return super().model_dump(**kwargs)
        except PydanticSerializationError as exc:
            _raise_interrupt_in(exc)
            raise

    def model_dump_json(self, **kwargs: Any) -> str:
        """pydantic's ``model_dump_json``, a Ctrl-C coming out as itself (:meth:`model_dump`)."""
        try:
            return super().model_dump_json(**kwargs)
        except PydanticSerializationError as exc:
            _raise_interrupt_in(exc)
            raise

    def to_json(self) -> str:
        """Compact JSON exactly as the Go seed would marshal this value."""
        return json.dumps(self.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        return cls.model_validate_json(text)


#: how pydantic-core says a Python serializer raised ``KeyboardInterrupt`` (nested in a
#: model, or under ``model_dump_json``, it keeps only this text, not the exception)
_INTERRUPTED = re.compile(r"Error calling function `\w+`: KeyboardInterrupt\b")


def _raise_interrupt_in(exc: PydanticSerializationError) -> None:
    """Raise the ``KeyboardInterrupt`` (or other exception that is no ``Exception``: an
    exit) a serialization error was raised from: itself when pydantic kept it as the cause,
    else a new ``KeyboardInterrupt`` when its message says one was raised. Else return."""
    if exc.__cause__ is not None and not isinstance(exc.__cause__, Exception):
        raise exc.__cause__ from None
    if _INTERRUPTED.search(str(exc)):
        raise KeyboardInterrupt from exc


def _unknown_keywords(model: type[BaseModel], unknown: list[str]) -> str:
    """``Capability() got an unexpected keyword argument 'request_shema' (did you mean
    'request_schema'?)``, as Python says it, with the closest field."""
    fields = list(model.model_fields)
    said = []
    for key in unknown:
        close = difflib.get_close_matches(key, fields, n=1)
        said.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    plural = "s" if len(unknown) > 1 else ""
    return (
        f"{model.__name__}() got unexpected keyword argument{plural} {', '.join(said)}; "
        f"its fields are {', '.join(fields)}"
    )


class Artifact(_Wire):
    """A pointer to a produced file, relative to a root supplied to the producing module."""

    _omitempty = frozenset({"presentation", "title"})

    id: str
    kind: str
    path: str
    root: str
    presentation: str = ""
    media_type: str
    bytes: int
    digest: str
    title: str = ""


class Effects(_Wire):
    local: bool = False
    network: bool = False
    external_writes: bool = False
    provider: str = ""
    cost_known: bool = False


class Capability(_Wire):
    _omitempty = frozenset({"poll_capability"})

    id: str
    title: str = ""
    summary: str = ""
    request_schema: str = ""
    result_schema: str = ""
    artifact_schemas: list[str] | None = None
    effects: Effects = Field(default_factory=Effects)
    skills: list[str] | None = None
    long_running: bool = False
    poll_capability: str = ""


class Overlay(_Wire):
    id: str
    title: str = ""
    path: str
    digest: str
    tokens: int = 0


class Skill(_Wire):
    id: str
    title: str = ""
    summary: str = ""
    path: str
    digest: str
    tokens: int = 0


class Permissions(_Wire):
    filesystem_read: list[str] | None = None
    filesystem_write: list[str] | None = None
    network: list[str] | None = None
    credentials: list[str] | None = None
    paid_providers: list[str] | None = None
    publish: bool = False
    subprocess: list[str] | None = None


class Requirement(_Wire):
    _omitempty = frozenset({"detail"})

    kind: str
    name: str
    available: bool = False
    detail: str = ""


class Descriptor(_Wire):
    module: str
    name: str = ""
    version: str = ""
    protocol_versions: list[str] | None = None
    capabilities: list[Capability] | None = None
    request_schemas: dict[str, Any] | None = None
    result_schemas: dict[str, Any] | None = None
    artifact_schemas: dict[str, Any] | None = None
    agent_overlays: list[Overlay] | None = None
    skills: list[Skill] | None = None
    permissions: Permissions = Field(default_factory=Permissions)
    requirements: list[Requirement] | None = None

    def capability(self, capability_id: str) -> Capability | None:
        """The capability with this id, or ``None``."""
        for cap in self.capabilities or ():
            if cap.id == capability_id:
                return cap
        return None


class Error(_Wire):
    code: str
    message: str = ""
    retryable: bool = False
    details: dict[str, Any] | None = None


class Execution(_Wire):
    local: bool = False
    network: bool = False
    external_writes: bool = False
    provider: str = ""
    estimated_cost: float | None = None
    actual_cost: float | None = None
    artifacts: list[Artifact] | None = None

    @field_serializer("estimated_cost", "actual_cost", when_used="json")
    def _go_float(self, value: float | None) -> float | int | None:
        return _go_number(value)

    def effects_wire(self) -> dict[str, Any]:
        """``model_dump(mode="json", exclude={"artifacts"})``, key for key and in the same
        order, built directly: what a batch keeps of every row's execution (its artifacts
        are kept on their own), without pydantic's serializer and its wrap function."""
        return {
            "local": self.local,
            "network": self.network,
            "external_writes": self.external_writes,
            "provider": self.provider,
            "estimated_cost": _go_number(self.estimated_cost),
            "actual_cost": _go_number(self.actual_cost),
        }


def _go_number(value: float | None) -> float | int | None:
    """A cost as JSON: Go's encoding/json writes an integral float64 without a fraction
    (``0``, not ``0.0``); a value JSON cannot hold (infinite, NaN) is ``null``, as pydantic
    writes it."""
    if value is None or not math.isfinite(value):
        return None
    if value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


class Envelope(_Wire):
    _omitnil = frozenset({"result", "error"})

    protocol: str
    module: str
    operation: str
    request_id: str
    ok: bool
    result: Any = None
    error: Error | None = None
    warnings: list[str] = Field(default_factory=list)
    execution: Execution = Field(default_factory=Execution)


class Grants(_Wire):
    network: list[str] | None = None
    credentials: list[str] | None = None
    paid_providers: list[str] | None = None
    publish: bool = False
    subprocess: list[str] | None = None

    def wire(self) -> dict[str, Any]:
        """``model_dump(mode="json")``, key for key and in the same order, built directly
        (each list a copy): part of every request a host sends."""
        network, credentials, paid, binaries = (
            self.network, self.credentials, self.paid_providers, self.subprocess)  # fmt: skip
        return {
            "network": None if network is None else list(network),
            "credentials": None if credentials is None else list(credentials),
            "paid_providers": None if paid is None else list(paid),
            "publish": self.publish,
            "subprocess": None if binaries is None else list(binaries),
        }


class Root(_Wire):
    path: str
    mode: str


_REQUEST_HOST_FIELDS = frozenset(
    {
        "protocol",
        "capability",
        "request_id",
        "input",
        "roots",
        "grants",
        "binaries",
        "deadline_ms",
        "max_output_bytes",
    }
)


class Request(_Wire):
    """One invocation request. ``extra`` is inlined at the root; host fields win."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    protocol: str = PROTOCOL_ID
    capability: str
    request_id: str
    input: Any = None
    roots: dict[str, Root] | None = None
    grants: Grants = Field(default_factory=Grants)
    binaries: dict[str, str] | None = None
    deadline_ms: int = 0
    max_output_bytes: int = 0
    extra: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @model_serializer(mode="wrap")
    def _inline_extra(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        data.pop("extra", None)
        merged = _own_extra(self.extra)
        merged.update(data)
        return merged

    def wire(self) -> dict[str, Any]:
        """What the module receives: ``model_dump(mode="json")``, key for key and in the
        same order, built directly (a host dumps a request at every call; this takes about
        half the serializer's time: 4.4 against 7.9 us for a request without roots in a
        loop, most of it the grants' own dump). ``input`` and ``extra`` must already be plain
        JSON data (the host's requests are: it checks them as strict JSON first); the
        returned dict shares their values."""
        wire = _own_extra(self.extra)
        roots = self.roots
        wire.update(
            protocol=self.protocol,
            capability=self.capability,
            request_id=self.request_id,
            input=self.input,
            roots=None if roots is None else {
                name: {"path": root.path, "mode": root.mode} for name, root in roots.items()},
            grants=self.grants.wire(),
            binaries=None if self.binaries is None else dict(self.binaries),
            deadline_ms=self.deadline_ms,
            max_output_bytes=self.max_output_bytes,
        )  # fmt: skip
        return wire

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("a modproto request is a JSON object")
        return cls.model_validate({**raw, "extra": _own_extra(raw)})


def _own_extra(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` without every key a Go decoder would take for a host field (exact or folded)."""
    if not fields:
        return {}
    taken = set(shadowing_keys(fields, _REQUEST_HOST_FIELDS))
    return {k: v for k, v in fields.items() if k not in taken}

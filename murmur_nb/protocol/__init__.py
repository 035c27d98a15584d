"""The modproto v1 wire vocabulary: descriptor, request, envelope, artifact and friends.

Field names, ``omitempty`` handling and ``null`` semantics follow the Go seed exactly;
see :mod:`murmur_nb.protocol._models` for the rules.
"""

from murmur_nb.protocol._models import (
    OPERATION_DESCRIBE,
    OPERATION_INVOKE,
    PROTOCOL_ID,
    Artifact,
    Capability,
    Descriptor,
    Effects,
    Envelope,
    Error,
    Execution,
    Grants,
    Overlay,
    Permissions,
    Request,
    Requirement,
    Root,
    Skill,
)
from murmur_nb.protocol._primitives import PRIMITIVES

__all__ = [
    "OPERATION_DESCRIBE",
    "OPERATION_INVOKE",
    "PRIMITIVES",
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

"""The rules the module checker enforces: one entry per check, quoting the contract.

Each rule names the sentence of SPEC §1 (or of the ``modproto`` seed) it enforces and says how
a module author fixes a breach. The checker (:mod:`.check`) decides pass or fail; this table
only words it, so a reader can audit the wording against the SPEC in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "Rule", "describe_rule_for_path", "envelope_rule"]


@dataclass(frozen=True, slots=True)
class Rule:
    """What a check enforces (``text``, quoted from the contract) and how to fix a breach."""

    id: str
    text: str
    fix: str


def _rules(*rules: Rule) -> dict[str, Rule]:
    return {r.id: r for r in rules}


RULES: dict[str, Rule] = _rules(
    Rule(
        "describe.runs",
        "`module describe` prints one Envelope (operation \"describe\", request_id \"\") whose "
        "result is the Descriptor, within the host's describe deadline (SPEC §1, Verbs).",
        "Make `module describe` print exactly one JSON envelope on standard output and exit; "
        "send diagnostics to standard error.",
    ),
    Rule(
        "describe.envelope",
        "The describe envelope's protocol equals \"modproto.v1\", module equals the folder "
        "name, and ok is true (SPEC §1, What the host checks on describe).",
        "Fill protocol, module (the folder name), operation \"describe\", an empty request_id "
        "and ok: true.",
    ),
    Rule(
        "describe.shape",
        "The descriptor has the seed's shape: the Go `modproto.Descriptor` fields with their "
        "JSON types (seed 004).",
        "Emit every required descriptor field with the type the seed's struct tags give.",
    ),
    Rule(
        "describe.stable",
        "describe is a pure report of what the module offers: two runs give the same "
        "descriptor (the host pins approvals to its digest, SPEC §1 Approval).",
        "Do not put timestamps, random ids or environment-dependent values in the descriptor.",
    ),
    Rule(
        "descriptor.protocol_versions",
        "\"modproto.v1\" is a member of protocol_versions (a membership test, nothing more).",
        "List \"modproto.v1\" in protocol_versions.",
    ),
    Rule(
        "descriptor.capability_ids",
        "Every capability id is namespaced `<module-id>.`; ids are unique.",
        "Name each capability '<module-id>.<name>' and give each a distinct name.",
    ),
    Rule(
        "descriptor.schema_ids",
        "Every request_schema / result_schema id exists in its map.",
        "Add the missing schema to request_schemas / result_schemas, or fix the id.",
    ),
    Rule(
        "descriptor.schemas_valid",
        "Each request and result schema is a valid JSON Schema document.",
        "Fix the schema so that it validates against its JSON Schema metaschema.",
    ),
    Rule(
        "descriptor.artifact_schemas",
        "Every id a capability lists in artifact_schemas exists in the descriptor's "
        "artifact_schemas.",
        "Declare the artifact schema id in the descriptor's artifact_schemas map.",
    ),
    Rule(
        "descriptor.poll_capability",
        "long_running capabilities name an existing poll_capability.",
        "Name a poll capability of this module in poll_capability (not the capability itself).",
    ),
    Rule(
        "descriptor.documents_confined",
        "Overlay and skill paths are relative and stay inside the module folder; digests "
        "have the form sha256: + 64 lowercase hex.",
        "Use a relative path inside the module folder (no '..', no link out) and a "
        "'sha256:<64 lowercase hex>' digest.",
    ),
    Rule(
        "descriptor.document_digests",
        "The host refuses overlay or skill content whose digest does not match (seed 004, "
        "AgentOverlays and Skills).",
        "Recompute the digest: 'sha256:' + the SHA-256 hex of the file's bytes.",
    ),
    Rule(
        "descriptor.unknown_keys",
        "Every key of the describe envelope and the descriptor is a field the modproto seed "
        "defines; the host ignores any other key, as Go's decoder does, so a misspelt key is "
        "a field left at its default (seed 004).",
        "Rename the key to the field it was meant to be (the detail names the closest), or "
        "drop it; a key of your own may stay, it is only ignored.",
    ),
    Rule(
        "descriptor.requirements",
        "Requirement kind is one of binary, version, config, env.",
        "Use one of the four requirement kinds.",
    ),
    Rule(
        "invoke.no_envelope",
        "`module invoke` prints one Envelope on standard output, whatever the input: the "
        "protocol's one unbreakable rule (SPEC §1, Verbs; seed 004, Error). Empty output, a "
        "traceback or any text that is not JSON is no envelope.",
        "Catch every exception and print an error envelope (ok: false, an error code such as "
        "'internal_error' or 'invalid_request', a message, an execution object); send the "
        "traceback to stderr. Severity: a crash on an input the schema allows FAILS, because "
        "the host sends such inputs; on an input the schema refuses it is a WARNING, because "
        "the host validates input before starting the module, so users never reach it.",
    ),
    Rule(
        "invoke.envelope",
        "protocol and module match; operation is \"invoke\"; request_id is echoed byte for "
        "byte; exactly one of result (when ok) and error (when not) is present; warnings is "
        "an array, never null; execution is present, also on failure (SPEC §1, What the host "
        "checks on the envelope).",
        "Print one envelope per invoke that follows every envelope rule.",
    ),
    Rule(
        "invoke.request_id",
        "request_id is echoed byte for byte.",
        "Copy request_id from the request into the envelope unchanged.",
    ),
    Rule(
        "invoke.execution",
        "execution is present, also on failure.",
        "Always include an execution object (with artifacts, cost and provider) in the "
        "envelope, also when ok is false.",
    ),
    Rule(
        "invoke.bounds",
        "The call ends within deadline_ms and prints at most max_output_bytes on standard "
        "output (SPEC §1, Running).",
        "Finish within the deadline (or declare the capability long_running with a poll "
        "capability) and put large results in an artifact.",
    ),
    Rule(
        "invoke.result_schema",
        "A successful result validates against the capability's result_schema.",
        "Make the result match result_schema, or fix the schema.",
    ),
    Rule(
        "invoke.artifacts_verify",
        "root names a root supplied to this invocation; path stays inside it; it is a regular "
        "file; its size equals bytes; its SHA-256 equals digest (SPEC §1, Artifacts).",
        "Write artifacts inside a supplied root and report their exact size and "
        "'sha256:<hex>' digest after the file is complete.",
    ),
    Rule(
        "invoke.artifact_kinds",
        "An artifact's kind must be one the capability declared in artifact_schemas.",
        "List the artifact's kind in the capability's artifact_schemas.",
    ),
    Rule(
        "invoke.presentation",
        "presentation names a primitive the host owns and one the artifact's media type can "
        "be shown as; an unknown value, or one the media type cannot honour, is ignored and "
        "the media type decides (SPEC §2).",
        "Use one of the 13 presentation primitives that fits the media_type (image for "
        "image/*, table for text/csv ...), or leave presentation empty.",
    ),
    Rule(
        "invoke.generated_inputs",
        "Inputs derived from the capability's request_schema (its boundary values first, "
        "then seeded random examples) are accepted by the host and answered by the module "
        "with a valid envelope.",
        "Check that request_schema describes the inputs the capability really accepts; a "
        "failing input is printed with a one-line reproduction.",
    ),
    Rule(
        "invoke.invalid_input",
        "A module answers an input it cannot use with ok: false and an error code, never a "
        "crash or a traceback on standard output (seed 004, Error).",
        "Validate the input and answer with ok: false, an error code such as "
        "'invalid_request', a message and an execution object.",
    ),
    Rule(
        "invoke.poll",
        "A long_running capability's poll_capability answers.",
        "Make the poll capability accept what the long-running call returned and answer "
        "with a valid envelope.",
    ),
    Rule(
        "invoke.approval",
        "Capabilities that need operator approval are not invoked unless the caller approves "
        "them (SPEC §1, Approval).",
        "Approve the capability to check it: murmur-nb check --approve CAPABILITY, pytest "
        "--modproto-approve CAPABILITY, or check_module(..., approve=[CAPABILITY]).",
    ),
    Rule(
        "invoke.coverage",
        "At least one capability is invoked with inputs its schema allows: a check that "
        "invoked none looked at no invoke rule.",
        "Declare the module's capabilities under 'capabilities', and approve (or set up) the "
        "ones the skipped rows name so they can run.",
    ),
    Rule(
        "invoke.requirements",
        "A module whose requirement is unmet needs setup before its capabilities can run.",
        "Meet the requirement named in the detail (install the binary, set the config).",
    ),
)

_DESCRIBE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("envelope", "describe.envelope"),
    ("protocol_versions", "descriptor.protocol_versions"),
    ("request_schemas", "descriptor.schemas_valid"),
    ("result_schemas", "descriptor.schemas_valid"),
    ("agent_overlays", "descriptor.documents_confined"),
    ("skills", "descriptor.documents_confined"),
    ("requirements", "descriptor.requirements"),
    ("module", "describe.envelope"),
    ("describe", "describe.runs"),
)


def describe_rule_for_path(path: str, detail: str = "") -> str:
    """The rule a describe-time problem at ``path`` (as the host reports it) breaks."""
    if path == "envelope" or (path == "module" and not detail.startswith("is ")):
        return "describe.runs"  # no envelope at all, or no executable to run
    if path.startswith("capabilities["):
        tail = path.split("]", 1)[1] if "]" in path else ""
        found = (rule for prefix, rule in _CAPABILITY_FIELDS if tail.startswith(prefix))
        return next(found, "describe.shape")
    if path.startswith(("agent_overlays", "skills")) and ".digest" in path:
        return "descriptor.documents_confined"
    return _prefix_rule(path)


_CAPABILITY_FIELDS: tuple[tuple[str | tuple[str, ...], str], ...] = (
    (".id", "descriptor.capability_ids"),
    ((".request_schema", ".result_schema"), "descriptor.schema_ids"),
    (".artifact_schemas", "descriptor.artifact_schemas"),
    (".poll_capability", "descriptor.poll_capability"),
)


def _prefix_rule(path: str) -> str:
    """The rule of a top-level descriptor field (``protocol_versions``, ``requirements``...)."""
    for prefix, rule in _DESCRIBE_PREFIXES:
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            if prefix == "requirements" and not path.endswith(".kind"):
                return "describe.shape"
            return rule
    return "describe.shape"


def envelope_rule(rule: str) -> str:
    """The check id for a host envelope rule name (``ProtocolViolation.rule``)."""
    if rule == "request_id":
        return "invoke.request_id"
    if rule == "execution":
        return "invoke.execution"
    if rule in {"max_output_bytes", "deadline_ms"}:
        return "invoke.bounds"
    return "invoke.envelope"

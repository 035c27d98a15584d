"""``murmur.yaml``: which hook components the kernel hosts, for which events, with what grants.

The file is shared with the runtime, so unknown top-level keys are left alone; inside a hook
entry or ``limits`` an unknown key is an error naming the nearest known one (a typo would
silently deny or unlimit a hook). Grants are default-deny and only YAML 1.2 ``true`` grants
(``read: yes`` stays a string, as a YAML 1.2 runtime reads it); a near-miss is kept as a
``note``, not an error, since SPEC §3 says such a hook still runs. Component paths are
relative to the file's folder. Limits are this package's addition (the runtime ignores them)::

    hook_limits: {time_ms: 5000, memory_mib: 256}   # the built-in defaults
    hooks:
      summarize:
        component: hooks/summarize.wasm
        events: [task-start, compact]                # default: every event
        capabilities: {conversation: {read: true}}
        limits: {time_ms: 2000, fuel: 2000000000}    # fuel: null meters without a cap

Store limits hold for one call's whole store: ``memory_mib`` is the total of all linear
memories, and ``instances``, ``tables``, ``table_elements`` bound the rest.
``result_messages`` (10,000) and ``result_mib`` (16) bound what is lifted out of a result; the
message count is checked inside the guest, before wasmtime copies anything out of it.

Every limit is a whole number from 1 to a ceiling (:data:`LIMIT_RANGES`, checked by
:func:`limit_problem` for the file and for :class:`HookLimits` made in Python alike), because
each ends in a fixed-width integer: wasmtime's C API takes the store limits as signed 64-bit
and fuel as ``u64``, so a larger number wrapped round to a small limit, or to none. The
ceilings: fuel below ``2**63`` (wasmtime keeps fuel signed; ``fuel: null`` meters without a
cap); ``memory_mib`` at most ``2**32`` MiB, 4 PiB, the most physical memory a 64-bit x86 or
Arm machine can address (52 bits): the store's total, since a store holds several memories
and this engine takes 64-bit ones; ``time_ms`` at most ``2**31 - 1`` (24.8 days), inside
``threading.TIMEOUT_MAX`` on every platform (49.7 days on Windows) and the epoch deadline's
``u64`` ticks; ``memories``, ``tables`` and ``instances`` at most 10,000, wasmtime's own
default for a store; ``table_elements`` and ``result_messages`` at most ``2**32 - 1``, a
32-bit table's and a canonical-ABI list's length; ``result_mib`` at most 4096, a 32-bit
memory's 4 GiB that a result is lifted from.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from murmur_nb._exceptions import HookConfigError
from murmur_nb._hooks.guest_code.compile_bounds import CompileBounds
from murmur_nb._rules import NotReadable, read_bounded

__all__ = [
    "EVENTS",
    "LIMIT_RANGES",
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "CompileBounds",
    "HookConfig",
    "HookEntry",
    "HookLimits",
    "UniqueKeyLoader",
    "YamlRefused",
    "limit_problem",
    "load_hook_config",
    "parse_hook_config",
]

#: The lifecycle events a hook can subscribe to, in dispatch order.
EVENTS: tuple[str, ...] = ("task-start", "compact")

_HOOK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

DEFAULT_TIME_MS = 5_000
DEFAULT_MEMORY_MIB = 256
DEFAULT_MEMORIES = 1
DEFAULT_INSTANCES = 32
DEFAULT_TABLES = 4
DEFAULT_TABLE_ELEMENTS = 100_000
DEFAULT_RESULT_MESSAGES = 10_000
DEFAULT_RESULT_MIB = 16

#: The largest value of each limit, and why (see the module docstring); the smallest is 1.
LIMIT_RANGES: dict[str, tuple[int, str]] = {
    "time_ms": (2**31 - 1, "about 24.8 days, within what a thread's wait accepts everywhere"),
    "memory_mib": (2**32, "4 PiB, the most memory a 64-bit machine can address"),
    "fuel": (2**63 - 1, "wasmtime keeps fuel as a signed 64-bit count; `fuel: null` meters "
                        "without a cap"),
    "memories": (10_000, "wasmtime's own limit for a store"),
    "tables": (10_000, "wasmtime's own limit for a store"),
    "instances": (10_000, "wasmtime's own limit for a store"),
    "table_elements": (2**32 - 1, "the length of a 32-bit table"),
    "result_messages": (2**32 - 1, "the longest list a hook can return"),
    "result_mib": (4096, "4 GiB, a 32-bit memory, which a result is lifted from"),
}  # fmt: skip


def limit_problem(key: str, value: object) -> str | None:
    """Why ``value`` cannot be the limit ``key`` (what follows ``<where>.<key>: `` in an
    error, before the fix), or ``None`` when it can; ``fuel`` may be ``None`` (no cap).

    >>> limit_problem("time_ms", 2000) is None
    True
    >>> limit_problem("fuel", 2**64)[:58]
    'expected a positive integer of at most 9,223,372,036,854,7'
    """
    if key == "fuel" and value is None:
        return None
    most, why = LIMIT_RANGES[key]
    if not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= most:
        return None
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return f"expected a positive integer of at most {most:,} ({why}), got {shown}"


def limit_example(key: str) -> int:
    """A value to suggest for the limit ``key`` in an error: its default."""
    default: int | None = HookLimits.model_fields[key].default
    return default or 1_000_000_000


class HookLimits(BaseModel):
    """Hard limits for one call of one hook.

    Attributes
    ----------
    time_ms : int
        Wall-clock budget of one call; the guest is interrupted when it runs past it.
    memory_mib : int
        Total linear memory of the whole store, in MiB (every memory of every instance).
    fuel : int or None
        Wasm instructions (roughly) one call may execute; ``None`` meters without a cap.
    memories, tables, instances : int
        How many linear memories, tables and core instances the store may hold.
    table_elements : int
        Elements one table may grow to.
    result_messages, result_mib : int
        The most messages, and MiB of text (every string counted), one result may hold; a
        larger result is refused with ``result_too_large`` before it becomes Python objects
        (a longer list before wasmtime copies any of it:
        :mod:`murmur_nb._hooks.guest_code.bounding`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    time_ms: int = DEFAULT_TIME_MS
    memory_mib: int = DEFAULT_MEMORY_MIB
    fuel: int | None = None
    memories: int = DEFAULT_MEMORIES
    tables: int = DEFAULT_TABLES
    instances: int = DEFAULT_INSTANCES
    table_elements: int = DEFAULT_TABLE_ELEMENTS
    result_messages: int = DEFAULT_RESULT_MESSAGES
    result_mib: int = DEFAULT_RESULT_MIB

    @model_validator(mode="before")
    @classmethod
    def _in_range(cls, data: Any) -> Any:
        """The same rule as ``murmur.yaml``'s (:func:`limit_problem`) for limits made in
        Python: an out-of-range value wraps in wasmtime instead of limiting."""
        if isinstance(data, dict):
            for key, value in data.items():
                problem = limit_problem(key, value) if key in LIMIT_RANGES else None
                if problem is not None:
                    raise ValueError(
                        f"HookLimits({key}=...): {problem}; pass e.g. "
                        f"HookLimits({key}={limit_example(key)})"
                    )
        return data

    @property
    def memory_bytes_each(self) -> int:
        """What one linear memory may grow to: the total split over ``memories``."""
        return (self.memory_mib << 20) // self.memories


class HookEntry(BaseModel):
    """One ``hooks:`` entry of ``murmur.yaml`` after validation."""

    model_config = ConfigDict(frozen=True)

    id: str
    component: Path
    events: tuple[str, ...]
    read_granted: bool
    limits: HookLimits
    notes: tuple[str, ...] = ()


class HookConfig(BaseModel):
    """The hook-related part of one ``murmur.yaml``, and the kernel's bounds on compiling.

    Attributes
    ----------
    compile_bounds : CompileBounds
        What compiling one of these hook components may cost: its locals (parameters
        included), the compiling child's seconds and MiB
        (:class:`murmur_nb._hooks.guest_code.compile_bounds.CompileBounds`):
        ``$MURMUR_NB_HOOK_MAX_LOCALS``, ``$MURMUR_NB_HOOK_COMPILE_S`` and
        ``$MURMUR_NB_HOOK_COMPILE_MB`` as they were when the config was made, read once here
        so that whatever loads these hooks elsewhere (a replay's Dask workers) applies the
        kernel's bounds, not its own environment's.
    """

    model_config = ConfigDict(frozen=True)

    path: Path | None
    transport: Literal["api", "process"]
    default_limits: HookLimits
    hooks: tuple[HookEntry, ...]
    compile_bounds: CompileBounds = Field(default_factory=CompileBounds.from_environment)


#: how deep a YAML document may nest: ``murmur.yaml`` needs five levels, a policy three; the
#: composer recurses a level at a time, so deeper raised ``RecursionError`` (about 300 levels)
MAX_YAML_DEPTH = 100
#: how many values a document may stand for once its aliases are expanded, where aliases make
#: it more than the values written (a file without aliases is bounded by its length alone)
MAX_YAML_VALUES = 100_000
#: the largest ``murmur.yaml`` (or ``--policy`` file) read: a few hundred bytes is usual, and
#: PyYAML reads ~200 KB a second, so a 9 MB file held ``HookHost.from_config`` 50 s
MAX_YAML_BYTES = 1 << 20


class YamlRefused(yaml.MarkedYAMLError):
    """A YAML document refused for how deep it nests or what its aliases make of it, not for
    its syntax."""


class UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses a key given twice in one mapping (PyYAML keeps the last:
    a hook entry, or its grant, a policy's allow-list, would be replaced without a word).

    It also refuses a document nested deeper than :data:`MAX_YAML_DEPTH`, and one whose
    aliases expand it past :data:`MAX_YAML_VALUES` values or into itself: PyYAML shares an
    aliased value rather than copying it, but whatever walks or prints the result goes through
    every copy, so a kilobyte of nested aliases (nine levels of ten ``*a``) stood for a
    billion events and ``HookHost.from_config`` never returned.
    """

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self._depth >= MAX_YAML_DEPTH:
            raise YamlRefused(
                None, None,
                f"nested deeper than {MAX_YAML_DEPTH} levels; a configuration needs a few",
                self.peek_event().start_mark,  # type: ignore[no-untyped-call]
            )  # fmt: skip
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expansion(node)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str | int | float | bool):
                continue  # not a key PyYAML keeps (it refuses an unhashable one itself)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"the key {key!r} is given twice (YAML would keep only the last); "
                    "merge the two or rename one", key_node.start_mark,
                )  # fmt: skip
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases make it stand for more than :data:`MAX_YAML_VALUES`
    values (more than it writes), or one holding itself; linear in the values written."""
    sizes: dict[int, int] = {}  # node -> values it stands for, itself included
    open_nodes: set[int] = set()  # on the path from the root, not yet sized
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_sized = stack.pop()
        if children_sized:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:
            raise YamlRefused(
                None, None,
                "an alias inside its own anchor makes this value hold itself without end; "
                "write the value out instead", node.start_mark,
            )  # fmt: skip
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    if sizes[id(root)] > max(MAX_YAML_VALUES, len(sizes)):
        raise YamlRefused(
            None, None,
            f"its aliases (*name) expand it to {sizes[id(root)]:,} values, more than the "
            f"{MAX_YAML_VALUES:,} a configuration may stand for; write the repeated parts "
            "out, or alias fewer", root.start_mark,
        )  # fmt: skip


class _CoreSchemaLoader(UniqueKeyLoader):
    """:class:`UniqueKeyLoader` whose booleans follow the YAML 1.2 core schema."""


_CoreSchemaLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_CoreSchemaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)

_LIMIT_KEYS = tuple(LIMIT_RANGES)
#: How a key YAML did not read as text is named in an error.
_YAML_KINDS = {bool: "a boolean", int: "a number", float: "a number", type(None): "null"}
_HOOK_KEYS = ("component", "events", "capabilities", "limits")


def _where(source: Path | None) -> str:
    return str(source) if source is not None else "murmur.yaml"


def _suggest(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return "known keys: " + ", ".join(known)


def _limits(raw: object, at: str, base: HookLimits, problems: list[str]) -> HookLimits:
    if raw is None:
        return base
    if not isinstance(raw, dict):
        problems.append(
            f"{at}: expected a mapping such as {{time_ms: 2000, memory_mib: 128}}, "
            f"got {type(raw).__name__}"
        )
        return base
    values: dict[str, Any] = base.model_dump()
    for key, value in raw.items():
        if key not in _LIMIT_KEYS:
            problems.append(f"{at}.{key}: unknown limit; {_suggest(str(key), _LIMIT_KEYS)}")
            continue
        problem = limit_problem(key, value)
        if problem is not None:
            problems.append(f"{at}.{key}: {problem}; write e.g. `{key}: {limit_example(key)}`")
            continue
        values[key] = value
    return HookLimits(**values)


def _grant(raw: object, at: str, notes: list[str]) -> bool:
    """Only the YAML boolean ``true`` at ``capabilities.conversation.read`` grants. A key
    this host grants nothing for (``conversations:``, ``raed:``, ``write:``) is noted: the
    file is the runtime's too, so it is not an error, but it grants nothing here."""
    if raw is None:
        return False
    if not isinstance(raw, dict):
        notes.append(f"{at} is not a mapping, so nothing is granted")
        return False
    for key in raw:
        if key != "conversation":
            hint = _suggest(str(key), ("conversation",))
            notes.append(f"{at}.{key} grants nothing here (this host grants only "
                         f"conversation.read); {hint}")  # fmt: skip
    conversation = raw.get("conversation")
    if conversation is None:
        return False
    if not isinstance(conversation, dict):
        notes.append(f"{at}.conversation is not a mapping, so reading is denied")
        return False
    for key in conversation:
        if key != "read":
            hint = _suggest(str(key), ("read",))
            notes.append(f"{at}.conversation.{key} grants nothing here (a hook may only "
                         f"read the conversation); {hint}")  # fmt: skip
    value = conversation.get("read")
    if value is True:
        return True
    if value is not None and value is not False:
        notes.append(
            f"{at}.conversation.read is {value!r} ({type(value).__name__}), not the YAML "
            "boolean true, so reading is denied; write `read: true` to grant it"
        )
    return False


def parse_hook_config(data: object, *, base_dir: Path, source: Path | None = None) -> HookConfig:
    """Validate parsed ``murmur.yaml`` data into a :class:`HookConfig`.

    Parameters
    ----------
    data : object
        The document as loaded from YAML (a mapping, or ``None`` for an empty file).
    base_dir : Path
        Directory that relative component paths are resolved against.
    source : Path, optional
        The file the data came from, named in error messages.

    Raises
    ------
    HookConfigError
        Listing every problem, each with its path in the document and how to fix it.
    """
    where = _where(source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise HookConfigError(
            f"{where}: the document must be a mapping with a `hooks:` key, "
            f"got {type(data).__name__}"
        )
    problems: list[str] = []
    transport = _transport(data.get("inference"), problems)
    defaults = _limits(data.get("hook_limits"), "hook_limits", HookLimits(), problems)
    entries: list[HookEntry] = []
    for hook_id, raw in _hooks_mapping(data.get("hooks"), problems).items():
        entry = _hook_entry(hook_id, raw, base_dir, defaults, problems)
        if entry is not None:
            entries.append(entry)
    if problems:
        raise HookConfigError(
            f"{where} has {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in problems)
        )
    return HookConfig(
        path=source, transport=transport, default_limits=defaults, hooks=tuple(entries)
    )


def _transport(inference: object, problems: list[str]) -> Literal["api", "process"]:
    """The ``inference.transport`` setting, ``api`` when absent or unusable."""
    if inference is None:
        return "api"
    if not isinstance(inference, dict):
        problems.append("inference: expected a mapping such as {transport: api}")
        return "api"
    value = inference.get("transport", "api")
    if value in ("api", "process"):
        return cast(Literal["api", "process"], value)
    problems.append(f"inference.transport: expected `api` or `process`, got {value!r}")
    return "api"


def _hooks_mapping(raw_hooks: object, problems: list[str]) -> dict[Any, Any]:
    """The ``hooks:`` mapping, empty when absent or not a mapping."""
    if raw_hooks is None:
        return {}
    if not isinstance(raw_hooks, dict):
        problems.append(
            "hooks: expected a mapping of hook id to entry, e.g. "
            "`hooks: {summarize: {component: hooks/summarize.wasm}}`"
        )
        return {}
    return raw_hooks


def _hook_entry(
    hook_id: object, raw: object, base_dir: Path, defaults: HookLimits, problems: list[str]
) -> HookEntry | None:
    """One ``hooks.<id>`` entry, or ``None`` (with problems noted) when it cannot be used."""
    at = f"hooks.{hook_id}"
    if not isinstance(hook_id, str):  # YAML made a number, a boolean or null of the key
        written = "null" if hook_id is None else str(hook_id).lower()
        kind = _YAML_KINDS.get(type(hook_id), f"a {type(hook_id).__name__}")
        problems.append(
            f"hooks.{written}: YAML reads this key as {kind}, not as text; quote it "
            f'(`"{written}":`) to make it the hook id, or rename the entry'
        )
        return None
    if not _HOOK_ID.match(hook_id):
        problems.append(
            f"{at}: a hook id is letters, digits, '.', '_' or '-' "
            "(at most 64, starting with a letter or digit); rename the entry"
        )
        return None
    if not isinstance(raw, dict):
        problems.append(f"{at}: expected a mapping with at least `component: <path to .wasm>`")
        return None
    for key in raw:
        if key not in _HOOK_KEYS:
            problems.append(f"{at}.{key}: unknown key; {_suggest(str(key), _HOOK_KEYS)}")
    component = raw.get("component")
    if not isinstance(component, str) or not component.strip():
        problems.append(
            f"{at}.component: required, the path of the hook's .wasm component "
            "relative to this file, e.g. `component: hooks/summarize.wasm`"
        )
        return None
    events = _events(raw.get("events", list(EVENTS)), at, problems)
    notes: list[str] = []
    granted = _grant(raw.get("capabilities"), f"{at}.capabilities", notes)
    limits = _limits(raw.get("limits"), f"{at}.limits", defaults, problems)
    path = Path(component)
    if not path.is_absolute():
        path = base_dir / path
    return HookEntry(
        id=hook_id,
        component=path,
        events=events,
        read_granted=granted,
        limits=limits,
        notes=tuple(notes),
    )


def _events(events_raw: object, at: str, problems: list[str]) -> tuple[str, ...]:
    """The entry's known events, in the order of :data:`EVENTS`, without repeats."""
    if isinstance(events_raw, str):
        events_raw = [events_raw]
    if not isinstance(events_raw, list):
        problems.append(f"{at}.events: expected a list such as [task-start, compact]")
        return ()
    events: list[str] = []
    for i, event in enumerate(events_raw):
        if event not in EVENTS:
            problems.append(
                f"{at}.events[{i}]: unknown event {event!r}; use one of {', '.join(EVENTS)}"
            )
        elif event not in events:
            events.append(event)
    return tuple(e for e in EVENTS if e in events)


def load_hook_config(path: str | Path) -> HookConfig:
    """Read and validate ``murmur.yaml``.

    Raises
    ------
    HookConfigError
        The file is missing, is not YAML, or has entries that cannot be used.
    """
    source = Path(path).expanduser().resolve()
    try:
        text = read_bounded(source, MAX_YAML_BYTES).decode("utf-8")
    except (OSError, NotReadable, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise HookConfigError(
            f"{source}: cannot read the hook configuration ({why}); pass the path of the "
            "capsule's murmur.yaml, a UTF-8 text file"
        ) from exc
    try:
        data = yaml.load(text, Loader=_CoreSchemaLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        if isinstance(exc, YamlRefused):
            raise HookConfigError(f"{source}: refused{at}: {problem}") from exc
        raise HookConfigError(
            f"{source}: not valid YAML{at}: {problem}; fix the syntax and load again"
        ) from exc
    return parse_hook_config(data, base_dir=source.parent, source=source)

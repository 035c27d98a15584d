"""The rules the hook checker enforces: one entry per check, quoting the contract (SPEC §3).

As for modules (:mod:`.check_rules`), the checker decides pass or fail and this table only
words each rule and its fix, so the wording can be audited against the SPEC in one place.
"""

from __future__ import annotations

from murmur_nb._checker.check_rules import Rule

__all__ = ["CALL_CODES", "HOOK_RULES", "LIMIT_CODES"]

#: Result codes that mean a configured limit stopped the call (``limits``).
LIMIT_CODES = frozenset({
    "deadline_exceeded", "fuel_exhausted", "memory_limit", "table_limit", "instance_limit",
    "result_too_large",
})  # fmt: skip
#: Result codes that mean a handler did not answer properly on its own (``handlers.answer``).
CALL_CODES = frozenset({"trap", "guest_error", "host_error"})


def _rules(*rules: Rule) -> dict[str, Rule]:
    return {r.id: r for r in rules}


HOOK_RULES: dict[str, Rule] = _rules(
    Rule(
        "world.exports",
        "The component exports murmur:hook/handlers@0.8.0 with on-task-start: "
        "func(task-start-event) -> result<string, string> and on-compact: "
        "func(list<message>) -> result<list<message>, string> (SPEC §3, The hook packages).",
        "Build the component against the `hook` world in the WIT folder murmur-nb ships "
        "(mnb.build_python_hook does), implementing both handlers with these signatures.",
    ),
    Rule(
        "world.imports",
        "The component imports only what the host links: murmur:conversation/read@0.1.x with "
        "the seed's read-messages, the lifecycle types, and WASI 0.2 (no files, environment "
        "or network) — nothing else (SPEC §3, Hook guests get ... only what the world imports).",
        "Drop the extra imports (or the library that pulls them in), and rebuild against the "
        "WIT folder murmur-nb ships so read-messages has the world's signature.",
    ),
    Rule(
        "handlers.answer",
        "on-task-start and on-compact answer ok, without trapping, on every generated record: "
        "empty, one message, 10,000 messages, non-ASCII and astral text, a huge content, odd "
        "roles, missing optional fields.",
        "Handle the case the detail names: an empty list, a role you do not know, a content "
        "that is not ASCII, `name`/`created-at` set to none; return err only when the hook "
        "really cannot answer.",
    ),
    Rule(
        "limits",
        "Every call ends within the configured limits (murmur.yaml `limits`: time_ms, "
        "memory_mib, fuel, tables, instances, result_messages, result_mib).",
        "Make the handler's work grow gently with the record (page through it, keep fewer "
        "messages), or raise the limit the detail names in murmur.yaml.",
    ),
    Rule(
        "determinism",
        "The same input gives the same output: each handler, called twice on the same record, "
        "returns the same value or the same error.",
        "Do not let randomness, clocks or hash order decide what is kept or said; sort and "
        "seed explicitly.",
    ),
    Rule(
        "messages.well_formed",
        "Returned messages are well-formed: every id non-empty and unique in the list; a "
        "message that keeps an input id is that input message unchanged; a new message has a "
        "role; a `tool` message carries the tool-message envelope (SPEC §3).",
        "Keep messages as you received them, give a new message (a summary) a new non-empty "
        "id and a role, and never return two messages with one id.",
    ),
    Rule(
        "grant.not_granted",
        "Without `capabilities.conversation.read: true` the hook still links and runs, "
        "read-messages answers `not-granted`, and the hook handles it: it answers ok or err, "
        "never traps or hits a limit (SPEC §3, Grants).",
        "Catch the `not-granted` error of read-messages and return ok (without the record) or "
        "err with a clear note, instead of unwrapping it.",
    ),
)

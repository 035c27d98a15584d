"""A module with one boundary bug, chosen by the word in ``fault.txt`` beside it.

Each fault is the kind of code that passes random testing and breaks at one edge of its
own request schema: a division by ``10 - n`` for ``n`` up to 10, a C-style buffer one byte
short at ``maxLength``, a lookup table that forgets the last ``enum`` value ... The bug is
a real crash (an uncaught exception: a traceback on stderr and no envelope on stdout).
"""

import json

from _proto import HERE, capability, descriptor, envelope, main

FAULT = (HERE / "fault.txt").read_text().strip() if (HERE / "fault.txt").exists() else ""

def c_string(text, size):
    """A C-style buffer of ``size`` bytes: no room left for the terminator at ``size``."""
    buffer = bytearray(size)
    buffer[: len(text)] = text.encode()
    buffer[len(text)] = 0
    return buffer


def terminated(items, size):
    """A fixed table of ``size`` slots with an end marker after the items."""
    slots = [None] * size
    slots[: len(items)] = items
    slots[len(items)] = "end"
    return slots


INT = {"type": "integer"}
STR = {"type": "string"}
# fault -> (the property's schema, whether it is required, the code that uses it)
FAULTS = {
    "maximum": ({**INT, "minimum": 0, "maximum": 10}, True, lambda n: 100 // (10 - n)),
    "minimum": ({**INT, "minimum": 1, "maximum": 100}, True, lambda n: 100 // (n - 1)),
    "exclusiveMinimum": ({**INT, "exclusiveMinimum": 0, "maximum": 50}, True,
                         lambda n: 1000 // (n - 1)),
    "exclusiveMaximum": ({**INT, "minimum": 0, "exclusiveMaximum": 10}, True,
                         lambda n: list(range(10))[n + 1]),
    "maxLength": ({**STR, "maxLength": 8}, True, lambda s: c_string(s, 8)),
    "minItems": ({"type": "array", "items": STR, "minItems": 1, "maxItems": 4}, True,
                 lambda items: (items[0], items[1])),
    "maxItems": ({"type": "array", "items": STR, "minItems": 1, "maxItems": 4}, True,
                 lambda items: terminated(items, 4)),
    "enum": ({"enum": ["fast", "slow", "exact"]}, True,
             lambda mode: {"fast": 1, "slow": 2}[mode]),
    "const": ({"const": 2}, False, lambda version: {1: "v1"}[version]),
    "required-only": ({**STR, "maxLength": 20}, False, None),
    "empty": (STR, True, lambda s: s[0]),
    "multipleOf": ({**INT, "minimum": 3, "maximum": 97, "multipleOf": 5}, True,
                   lambda n: ([0] * 19)[n // 5]),  # one slot per multiple below 95
    "branch": ({"oneOf": [{**STR, "minLength": 1}, INT]}, True, lambda v: v.upper()),
    "non-ascii": ({**STR, "maxLength": 20}, True, lambda s: s.encode("ascii")),
    "astral": ({**STR, "maxLength": 10}, True,
               lambda s: [bytearray(0x10000)[ord(c)] for c in s]),
    "big-integer": ({**INT, "minimum": 0}, True,
                    lambda n: 1 // (int(float(n)) == n)),  # ids kept in a double
}


def default():
    prop, required, _ = FAULTS.get(FAULT, (INT, True, None))
    schema = {"type": "object", "properties": {"value": prop, "label": {**STR, "maxLength": 20}},
              "required": ["value"] if required else [], "additionalProperties": False}
    return descriptor([capability("run", request_schema="run_in")],
                      request_schemas={"run_in": schema})


def handle(name, request):
    inp = request["input"]
    _, _, use = FAULTS.get(FAULT, (None, True, None))
    if FAULT == "required-only":
        inp["value"].upper()  # assumes the optional property is always sent
    elif use is not None and "value" in inp:
        use(inp["value"])
    return envelope("invoke", request["request_id"], result={"echo": json.dumps(inp)[:40]})


main(default, handle)

"""A fixture module that reports whatever cost its input names, lies included.

``spend`` answers ``{"n": n}`` and reports ``estimated_cost`` and ``actual_cost`` of ``cost``:
a number as given, or the text ``"nan"``, ``"inf"`` or ``"-inf"``, printed as the bare
``NaN`` / ``Infinity`` / ``-Infinity`` that Python's ``json`` writes (no JSON input can carry
them); ``"string"`` reports the text ``"1"``. Each call drops ``<n>-<request_id>`` into its
``log`` root when the policy maps one, so a test counts real runs.
"""

from pathlib import Path

from _proto import capability, descriptor, envelope, execution_of, main

SPEND = {"type": "object", "properties": {
    "n": {"type": "integer"}, "cost": {"type": ["number", "string"]}}, "required": ["n"]}


def default():
    return descriptor([capability("spend", request_schema="spend")],
                      permissions={"filesystem_write": ["log"]},
                      request_schemas={"spend": SPEND})


def _cost(value):
    if value == "string":
        return "1"
    return float(value) if isinstance(value, str) else value


def handle(name, request):
    rid = request["request_id"]
    roots = request.get("roots") or {}
    inp = request.get("input") or {}
    n = inp.get("n", 0)
    if "log" in roots:
        Path(roots["log"]["path"], f"{n}-{rid}").write_text("")
    cost = _cost(inp.get("cost", 0))
    return envelope("invoke", rid, result={"n": n},
                    execution=execution_of(estimated=cost, actual=cost))


main(default, handle)

"""A fixture module that prints numbers JSON has not, as Python's ``json`` writes them.

``nan``   answers ``{"x": NaN}``; ``inf`` answers ``{"y": [Infinity]}``; ``huge`` answers a
``1e999`` written out as such (no float holds it). With a file ``describe_nan`` beside the
module, its descriptor's request schema holds ``"default": NaN``.
"""

import json
import sys

from _proto import HERE, capability, descriptor, envelope, main

SCHEMA = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}


def default():
    desc = descriptor([capability("nan"), capability("inf"), capability("huge")])
    if (HERE / "describe_nan").exists():
        desc["request_schemas"]["any_in"] = {**SCHEMA, "default": float("nan")}
    return desc


def handle(name, request):
    rid = request["request_id"]
    if name == "huge":
        text = json.dumps(envelope("invoke", rid, result={"z": 1.5}))
        sys.stdout.write(text.replace("1.5", "1e999"))
        sys.exit(0)
    result = {"x": float("nan")} if name == "nan" else {"y": [float("inf")]}
    return envelope("invoke", rid, result=result)


main(default, handle)

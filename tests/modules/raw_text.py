"""A fixture module that says what ``input.escaped`` spells: a JSON string body (``\\ud800``,
``\\u001b[2J``) decoded here, so its answer can hold text no well-behaved module sends (a lone
surrogate, terminal control sequences) in its result, its warnings or its error message.

``say``   answers ok: ``result`` ``{"text": ...}`` and the text as its one warning.
``fail``  answers ``ok: false`` with the text as ``error.message``.
"""

import json

from _proto import capability, descriptor, envelope, main


def default():
    return descriptor([capability("say"), capability("fail")])


def handle(name, request):
    rid = request["request_id"]
    text = json.loads('"' + (request.get("input") or {})["escaped"] + '"')
    if name == "fail":
        return envelope("invoke", rid, error={"code": "said_no", "message": text,
                                              "retryable": False})
    return envelope("invoke", rid, result={"text": text}, warnings=[text])


main(default, handle)

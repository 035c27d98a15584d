"""A module whose request schema allows a long wait: ``wait`` sleeps ``seconds`` (0 to 30).

Correct in every way, only slow where its own schema lets it be: the checker's boundary
input at ``maximum`` asks it to wait 30 s. A value its schema refuses (a string, a negative
number) is answered with an error envelope at once; one past the maximum is waited for too.
"""

import time

from _proto import capability, descriptor, envelope, main

SCHEMA = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 30}},
    "required": ["seconds"],
    "additionalProperties": False,
}


def default():
    return descriptor([capability("wait", request_schema="wait_in")],
                      request_schemas={"wait_in": SCHEMA})


def handle(name, request):
    seconds = request["input"].get("seconds") if isinstance(request["input"], dict) else None
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        return envelope("invoke", request["request_id"], error={
            "code": "invalid_input", "message": "seconds: a number from 0 to 30",
            "retryable": False, "details": None})
    time.sleep(seconds)
    return envelope("invoke", request["request_id"], result={"waited": seconds})


main(default, handle)

"""A hostile long-running fixture module: its job's news and its batch rows are attacks.

``SAID`` (below) is markup that runs script where HTML is inserted raw, a terminal clear, a
C1 CSI and a right-to-left override. ``start`` (long-running, polled by ``status``) answers
a job whose name, note and progress words are ``SAID`` and ``big`` characters more; the
poll answers the same words with ``done`` of ``total`` (``mode`` ``fail``: a module error
whose code and message are the words, ``crash``: no envelope, an exit status 3). ``work``
(a batch's rows) answers the words as its result, or fails with them when ``n`` is odd.
Every call writes the words to stderr, ``big`` characters of them at most.
"""

import sys

from _proto import capability, descriptor, envelope, execution_of, main

SAID = "<img src=x onerror=alert(1)>\x1b[2J\u009b31m \u202egnp.exe "
ASK = {"type": "object", "properties": {"n": {"type": "integer"}, "big": {"type": "integer"},
                                        "mode": {"type": "string"}}}
JOB = {"type": "object", "properties": {"job": {"type": "string"}, "big": {"type": "integer"},
                                        "mode": {"type": "string"}}}


def default():
    return descriptor(
        [capability("start", request_schema="ask", long_running=True, poll="status"),
         capability("status", request_schema="job"), capability("work", request_schema="ask")],
        request_schemas={"ask": ASK, "job": JOB},
    )


def words(big):
    return SAID + (SAID * (big // len(SAID) + 1))[:big]


def handle(name, request):
    rid = request["request_id"]
    inp = request.get("input") or {}
    big, mode = int(inp.get("big", 0)), inp.get("mode", "")
    said = words(big)
    sys.stderr.write(said + "\n")
    sys.stderr.flush()
    if name == "start":
        return envelope("invoke", rid, result={"job": SAID, "big": big, "mode": mode,
                                               "state": "running", "note": said, "done": 0,
                                               "total": 3}, warnings=[said])
    if name == "status":
        if mode == "crash":
            sys.exit(3)
        if mode == "fail":
            return envelope("invoke", rid, error={"code": said, "message": said,
                                                  "retryable": False},
                            warnings=[said], execution=execution_of())
        return envelope("invoke", rid, result={"job": SAID, "state": "done", "note": said,
                                               "message": said, "done": 3, "total": 3},
                        warnings=[said])
    if inp.get("n", 0) % 2:
        return envelope("invoke", rid, error={"code": said, "message": said,
                                              "retryable": False}, warnings=[said],
                        execution=execution_of())
    return envelope("invoke", rid, result={"text": said}, warnings=[said])


main(default, handle)

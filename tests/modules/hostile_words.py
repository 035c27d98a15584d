"""A hostile fixture module whose every word is an attack on the terminal that shows it.

``SAID`` (below) retitles a terminal (OSC 0), clears it, forges a green PASS, opens a CSI with
the one character U+009B and reverses what follows (U+202E). It is the module's name, each
capability's title and summary, an unmet requirement's name and detail, a key of its
descriptor, and, on ``invoke``, its stderr, its warning, its result (``ok``) and its error's
code and message (``fail``). ``big_key`` beside the module names the length of one more
descriptor key (a letter repeated).
"""

import sys

from _proto import HERE, capability, descriptor, envelope, execution_of, main

SAID = "\x1b]0;owned\x07\x1b[2J\x1b[32mPASS\x1b[0m \u009b31m caf\u00e9 \u202eevil\x7f"


def default():
    caps = [capability(n) for n in ("ok", "fail")]
    for cap in caps:
        cap["title"], cap["summary"] = f"title {SAID}", f"summary {SAID}"
    desc = descriptor(caps)
    desc["name"] = f"name {SAID}"
    desc[f"key {SAID}"] = 1
    big = HERE / "big_key"
    if big.exists():
        desc["k" * int(big.read_text())] = 1
    if (HERE / "unmet").exists():
        desc["requirements"] = [{"kind": "binary", "name": f"name {SAID}", "available": False,
                                 "detail": f"detail {SAID}"}]
    return desc


def handle(name, request):
    rid = request["request_id"]
    sys.stderr.write(f"stderr {SAID}\n")
    if name == "ok":
        return envelope("invoke", rid, result={"text": SAID}, warnings=[f"warning {SAID}"])
    return envelope("invoke", rid, error={"code": f"code {SAID}", "message": f"message {SAID}",
                                          "retryable": False},
                    warnings=[f"warning {SAID}"], execution=execution_of())


main(default, handle)

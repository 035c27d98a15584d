"""A fixture module that breaks one envelope rule per call, chosen by ``input.break``."""

import json
import sys

from _proto import MODULE_ID, capability, descriptor, envelope, execution_of, main


def default():
    return descriptor([capability("say")])


def handle(name, request):
    mode = (request.get("input") or {}).get("break", "")
    rid = request["request_id"]
    env = envelope("invoke", rid, result={"said": True},
                   execution=execution_of(estimated=None, actual=1.5))
    if mode == "request_id":
        env["request_id"] = rid[:-1] + ("0" if rid[-1] != "0" else "1")
    elif mode == "both":
        env["error"] = {"code": "x", "message": "y", "retryable": False, "details": None}
    elif mode == "neither":
        del env["result"]
    elif mode == "warnings_null":
        env["warnings"] = None
    elif mode == "no_execution":
        del env["execution"]
    elif mode == "protocol":
        env["protocol"] = "modproto.v2"
    elif mode == "module":
        env["module"] = MODULE_ID + "-other"
    elif mode == "operation":
        env["operation"] = request["capability"]
    elif mode == "not_json":
        sys.stdout.write("Traceback (most recent call last): oops\n")
        sys.exit(0)
    elif mode == "trailing":
        sys.stdout.write(json.dumps(env) + '\n{"extra": true}\n')
        sys.exit(0)
    return env


main(default, handle)

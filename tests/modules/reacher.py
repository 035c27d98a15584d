"""A fixture module that reaches into its roots: writes in ``out``, reads paths it is given.

``write``: makes ``input.name`` (a file, or a folder with ``input.folder``) in ``out``.
``read``: reads each path of ``input.paths`` and says, for each, the text or the error.
``whoami``: the uid it runs as.
"""

import os
from pathlib import Path

from _proto import capability, descriptor, envelope, main


def default():
    return descriptor([capability(n) for n in ("write", "read", "whoami")],
                      permissions={"filesystem_read": ["src"], "filesystem_write": ["out"]})


def read(paths):
    seen = {}
    for path in paths:
        try:
            seen[path] = Path(path).read_text()
        except OSError as exc:
            seen[path] = f"error: {exc.strerror}"
    return seen


def handle(name, request):
    inp = request.get("input") or {}
    if name == "write":
        target = Path(request["roots"]["out"]["path"], inp["name"])
        if inp.get("folder"):
            target.mkdir()
            (target / "inside.txt").write_text("made by the module")
        else:
            target.write_text("made by the module")
        result = {"made": str(target)}
    elif name == "read":
        result = read(inp["paths"])
    else:
        result = {"uid": os.getuid()}
    return envelope("invoke", request["request_id"], result=result)


main(default, handle)

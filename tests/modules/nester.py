"""A fixture module that leaves a chain of nested folders in its working folder.

``nest`` makes ``{"depth": n}`` folders, each inside the last (a file in each), starting in
its working folder, and answers how deep it got. Python's own tree walkers recurse a level
at a time (``os.fwalk``, ``shutil.rmtree`` before 3.12): a few thousand levels end them.
"""

import os
from pathlib import Path

from _proto import capability, descriptor, envelope, main


def default():
    return descriptor([capability("nest")])


def handle(name, request):
    depth = int(request["input"].get("depth", 3000))
    made = 0
    for _ in range(depth):
        Path("d").mkdir()
        os.chdir("d")
        Path("f").write_text("x")
        made += 1
    return envelope("invoke", request["request_id"], result={"made": made})


main(default, handle)

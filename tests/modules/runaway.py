"""A fixture module whose processes misbehave: trees that outlive deadlines, floods of output.

Every process it starts writes ``<role>.pid`` into its ``out`` root, so a test can check each
one is gone afterwards.
"""

import os
import sys
import time
from pathlib import Path

from _proto import capability, descriptor, envelope, main


def default():
    return descriptor(
        [capability(n) for n in ("tree", "daemon", "flood", "chatter", "hang", "linger")],
        permissions={"filesystem_write": ["out"]},
    )


def note(out, role):
    # the pid as this process sees it, and its pid namespace (the sandbox has its own)
    ident = f"{os.getpid()} {Path('/proc/self/ns/pid').readlink()}"
    Path(out, f"{role}.pid.tmp").write_text(ident)
    Path(out, f"{role}.pid.tmp").replace(Path(out, f"{role}.pid"))


def sleep_forever():
    while True:
        time.sleep(60)


def detach_stdio():
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)


def handle(name, request):
    out = request["roots"]["out"]["path"]
    note(out, "root")
    if name == "tree":
        if os.fork() == 0:  # child
            note(out, "child")
            if os.fork() == 0:  # grandchild, same session
                note(out, "grandchild")
                sleep_forever()
            if os.fork() == 0:  # grandchild in a session of its own
                os.setsid()
                note(out, "setsid")
                sleep_forever()
            sleep_forever()
        sleep_forever()
    if name == "daemon":
        if os.fork() == 0:  # intermediate: starts a detached daemon, then exits
            note(out, "child")
            if os.fork() == 0:
                os.setsid()
                os.chdir("/")
                detach_stdio()
                note(out, "setsid")
                sleep_forever()
            time.sleep(0.3)
            os._exit(0)
        sleep_forever()
    if name == "flood":
        chunk = b"x" * (1 << 20)
        for _ in range(1024):  # 1 GiB
            sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        return envelope("invoke", request["request_id"], result={})
    if name == "chatter":
        # 256 MiB of diagnostics on standard error, then a good answer
        chunk = b"y" * (1 << 20)
        for _ in range(256):
            sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.write(b"z" * (96 << 10) + b"\nlast words\n")
        sys.stderr.flush()
        return envelope("invoke", request["request_id"], result={"chatted": True})
    if name == "hang":
        sleep_forever()
    if name == "linger":
        # answers at once but leaves a setsid'd process holding standard output open
        if os.fork() == 0:
            os.setsid()
            note(out, "setsid")
            sleep_forever()
        time.sleep(0.05)
        return envelope("invoke", request["request_id"], result={"lingering": True})
    return envelope("invoke", request["request_id"], result={})


main(default, handle)

"""Demo module ``transcribe``: speech to text through whisper.cpp, which is usually not set up.

This is the "Needs setup" example. ``describe`` probes for the ``whisper-cli`` binary of
whisper.cpp in the usual install places and for the model file in this module's folder, and
reports each as a requirement with ``available`` and a ``detail`` naming the fix. ``invoke``
fails closed with ``missing_requirement`` when the host did not supply ``whisper-cli`` in
``Request.binaries`` or the model is missing; it never searches for the binary itself.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from murmur_nb._demo.modules import _kit as kit
else:  # the installed module folder carries its own copy of the kit
    import _kit as kit

MODULE = "transcribe"
HERE = Path(__file__).resolve().parent
MODEL = HERE / "models" / "ggml-base.en.bin"
_WHISPER_PLACES = (
    "/usr/local/bin/whisper-cli",
    "/usr/bin/whisper-cli",
    "/opt/whisper.cpp/build/bin/whisper-cli",
)


def _requirements() -> list[dict[str, Any]]:
    found = next((p for p in _WHISPER_PLACES if Path(p).is_file()), None)
    binary: dict[str, Any] = {"kind": "binary", "name": "whisper-cli", "available": bool(found)}
    if not found:
        binary["detail"] = (
            "whisper-cli (from whisper.cpp) was not found in "
            f"{', '.join(_WHISPER_PLACES)}: build whisper.cpp (cmake -B build && cmake --build "
            "build) and install build/bin/whisper-cli there, then grant it in the host policy, "
            "e.g. Policy(subprocess=['whisper-cli'], binaries={'whisper-cli': '<path>'})"
        )
    model: dict[str, Any] = {"kind": "config", "name": "model", "available": MODEL.is_file()}
    if not MODEL.is_file():
        model["detail"] = (
            f"the speech model is missing: download ggml-base.en.bin from the whisper.cpp "
            f"model list and save it as {MODEL}"
        )
    return [binary, model]


DESCRIPTOR: dict[str, Any] = {
    "module": MODULE,
    "name": "Transcribe",
    "version": "0.3.0",
    "protocol_versions": [kit.PROTOCOL_ID],
    "capabilities": [
        kit.capability(
            "transcribe.audio",
            "Transcribe audio",
            "Turn a staged WAV recording into text with whisper.cpp.",
            artifacts=["transcribe.text"],
        )
    ],
    "request_schemas": {
        "transcribe.audio.request": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "audio": {
                    "type": "object",
                    "properties": {"root": {"type": "string"}, "path": {"type": "string"}},
                    "required": ["root", "path"],
                    "additionalProperties": False,
                },
                "language": {"type": "string", "enum": ["en", "auto"], "default": "en"},
            },
            "required": ["audio"],
            "additionalProperties": False,
        }
    },
    "result_schemas": {
        "transcribe.audio.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {"characters": {"type": "integer"}},
            "required": ["characters"],
        }
    },
    "artifact_schemas": {
        "transcribe.text": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "text/plain"}
    },
    "agent_overlays": [],
    "skills": [],
    "permissions": {
        "filesystem_read": ["staged"],
        "filesystem_write": ["out"],
        "network": [],
        "credentials": [],
        "paid_providers": [],
        "publish": False,
        "subprocess": ["whisper-cli"],
    },
    "requirements": _requirements(),
}


def audio(ctx: kit.Context) -> kit.Outcome:
    whisper = ctx.binary("whisper-cli")
    if not MODEL.is_file():
        raise kit.Failure(
            "missing_requirement",
            f"the speech model {MODEL.name} is missing from {MODEL.parent}; see the module's "
            "'model' requirement for how to get it",
        )
    ref = ctx.input.get("audio")
    if not isinstance(ref, dict):
        raise kit.Failure("invalid_input", "'audio' must be {'root': ..., 'path': ...}")
    data = ctx.read_file(ref)
    with tempfile.TemporaryDirectory(dir=".") as work:
        wav = Path(work) / "input.wav"
        wav.write_bytes(data)
        stem = Path(work) / "transcript"
        proc = subprocess.run(
            [whisper, "-m", str(MODEL), "-f", str(wav), "-l", str(ctx.input.get("language", "en")),
             "-otxt", "-of", str(stem), "-np"],
            capture_output=True,
            env={},
            check=False,
        )
        if proc.returncode != 0:
            raise kit.Failure("transcription_failed",
                              f"whisper-cli exited with status {proc.returncode}: "
                              f"{proc.stderr.decode(errors='replace')[-300:].strip()}")
        text = stem.with_suffix(".txt").read_bytes()
    ctx.write("transcript.txt", text, kind="transcribe.text", media_type="text/plain",
              presentation="text", title="Transcript")
    return kit.Outcome({"characters": len(text.decode(errors="replace"))},
                       estimated_cost=0.0, actual_cost=0.0)


HANDLERS: dict[str, kit.Handler] = {"transcribe.audio": audio}


def main(argv: list[str]) -> int:
    return kit.run(DESCRIPTOR, HANDLERS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Demo module ``studio``: a WAV tone, an MP4 clip, and a long-running storyboard job.

* ``studio.tone`` synthesises a short melody with the standard library's ``wave`` (audio).
* ``studio.clip`` paints frames with Pillow and encodes them with the ``ffmpeg`` binary the
  host supplies in ``Request.binaries`` (video). The module never searches for ffmpeg itself:
  without a supplied path it fails closed with ``missing_requirement``.
* ``studio.storyboard`` is long running: it returns a job handle at once, and each call of
  its poll capability ``studio.storyboard_status`` renders one more scene. The job lives in
  the ``jobs`` root, which the host must map to a folder that persists between calls.

Everything is local, free and deterministic (``-threads 1``, ``+bitexact`` and a bitexact RGB to
YUV conversion for ffmpeg: the clip is the same on every processor).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import struct
import subprocess
import sys
import wave
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from murmur_nb._demo.modules import _kit as kit
else:  # the installed module folder carries its own copy of the kit
    import _kit as kit

from PIL import Image, ImageDraw, ImageFont

MODULE = "studio"
_FFMPEG_PLACES = ("/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg")
_DEFAULT_SCENES = [
    "Open on the notebook",
    "Modules appear in the browser",
    "Approve a paid call",
    "Artifacts render inline",
]
_MELODIES: dict[str, list[float]] = {
    # semitones above A4; one note per beat
    "arpeggio": [0, 4, 7, 12, 7, 4, 0, -5],
    "scale": [0, 2, 4, 5, 7, 9, 11, 12],
    "chime": [12, 7, 0, 7, 12, 16, 19, 24],
}


def _ffmpeg_probe() -> dict[str, Any]:
    available = find_spec("imageio_ffmpeg") is not None or any(
        Path(p).is_file() for p in _FFMPEG_PLACES
    )
    requirement: dict[str, Any] = {"kind": "binary", "name": "ffmpeg", "available": available}
    if not available:
        requirement["detail"] = (
            "ffmpeg is needed by studio.clip and was not found: install it with "
            "`pip install 'murmur-nb[render]'` (in a murmur-nb checkout: "
            "`pip install -e '.[render]'`), which brings imageio-ffmpeg, or your system's ffmpeg "
            "package, then map it in the host policy, e.g. Policy(subprocess=['ffmpeg'], "
            "binaries={'ffmpeg': imageio_ffmpeg.get_ffmpeg_exe()})"
        )
    return requirement


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "$schema": kit.SCHEMA_DIALECT,
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


_JOB_RESULT = {
    "$schema": kit.SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "job": {"type": "string"},
        "state": {"enum": ["running", "done"]},
        "done": {"type": "integer"},
        "total": {"type": "integer"},
        "poll_capability": {"type": "string"},
    },
    "required": ["job", "state", "done", "total"],
}

DESCRIPTOR: dict[str, Any] = {
    "module": MODULE,
    "name": "Studio",
    "version": "1.0.0",
    "protocol_versions": [kit.PROTOCOL_ID],
    "capabilities": [
        kit.capability(
            "studio.tone",
            "Tone",
            "Synthesise a short melody as a WAV file.",
            artifacts=["studio.wav"],
        ),
        kit.capability(
            "studio.clip",
            "Clip",
            "Render a short animated title clip as MP4 (H.264) through ffmpeg.",
            artifacts=["studio.mp4"],
        ),
        kit.capability(
            "studio.storyboard",
            "Storyboard (long running)",
            "Start a storyboard job; poll studio.storyboard_status until it is done.",
            artifacts=[],
            skills=["studio.storyboards"],
            poll="studio.storyboard_status",
        ),
        kit.capability(
            "studio.storyboard_status",
            "Storyboard status",
            "Advance a storyboard job by one scene; when done, return timeline and slides.",
            artifacts=["studio.timeline", "studio.slides", "studio.png"],
            skills=["studio.storyboards"],
        ),
    ],
    "request_schemas": {
        "studio.tone.request": _schema(
            {
                "melody": {"enum": sorted(_MELODIES), "default": "arpeggio"},
                "beats_per_minute": {
                    "type": "integer",
                    "minimum": 40,
                    "maximum": 480,
                    "default": 240,
                },
                "sample_rate": {"enum": [16000, 22050, 44100], "default": 22050},
            }
        ),
        "studio.clip.request": _schema(
            {
                "title": {"type": "string", "maxLength": 40, "default": "murmur-nb"},
                "seconds": {"type": "number", "minimum": 0.5, "maximum": 10, "default": 3},
                "fps": {"type": "integer", "minimum": 4, "maximum": 30, "default": 12},
                "width": {"type": "integer", "minimum": 64, "maximum": 640, "default": 320},
                "height": {"type": "integer", "minimum": 64, "maximum": 480, "default": 180},
            }
        ),
        "studio.storyboard.request": _schema(
            {
                "title": {"type": "string", "maxLength": 60, "default": "murmur-nb in a minute"},
                "scenes": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 60},
                    "minItems": 1,
                    "maxItems": 12,
                    "default": _DEFAULT_SCENES,
                },
                "seconds_per_scene": {
                    "type": "number",
                    "minimum": 1,
                    "maximum": 60,
                    "default": 4,
                },
            }
        ),
        "studio.storyboard_status.request": _schema(
            {"job": {"type": "string", "pattern": "^[0-9a-f]{16}$"}}, ["job"]
        ),
    },
    "result_schemas": {
        "studio.tone.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "sample_rate": {"type": "integer"}},
            "required": ["seconds", "sample_rate"],
        },
        "studio.clip.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {"frames": {"type": "integer"}, "seconds": {"type": "number"}},
            "required": ["frames", "seconds"],
        },
        "studio.storyboard.result": _JOB_RESULT,
        "studio.storyboard_status.result": _JOB_RESULT,
    },
    "artifact_schemas": {
        "studio.wav": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "audio/wav"},
        "studio.mp4": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "video/mp4"},
        "studio.png": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "image/png"},
        "studio.slides": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "text/markdown"},
        "studio.timeline": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "events": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "start": {"type": "number"},
                            "end": {"type": "number"},
                            "label": {"type": "string"},
                            "lane": {"type": "string"},
                        },
                        "required": ["start", "label"],
                    },
                }
            },
            "required": ["events"],
        },
    },
    "agent_overlays": [],
    "skills": [
        {
            "id": "studio.storyboards",
            "title": "Storyboards",
            "summary": "How the long-running storyboard job and its poll capability work.",
            "path": "skills/storyboards.md",
            "digest": "sha256:998cc56c09d983da06be1221e47570225b402c51ced0f4e357ba4d5d50bf79a8",
            "tokens": 90,
        }
    ],
    "permissions": {
        "filesystem_read": [],
        "filesystem_write": ["out", "jobs"],
        "network": [],
        "credentials": [],
        "paid_providers": [],
        "publish": False,
        "subprocess": ["ffmpeg"],
    },
    "requirements": [_ffmpeg_probe()],
}


def _free(result: Any) -> kit.Outcome:
    return kit.Outcome(result, estimated_cost=0.0, actual_cost=0.0)


def tone(ctx: kit.Context) -> kit.Outcome:
    melody = str(ctx.input.get("melody", "arpeggio"))
    bpm = int(ctx.input.get("beats_per_minute", 240))
    rate = int(ctx.input.get("sample_rate", 22050))
    if melody not in _MELODIES:
        raise kit.Failure("invalid_input", f"unknown melody {melody!r}; use {sorted(_MELODIES)}")
    beat = 60.0 / bpm
    per_beat = int(rate * beat)
    frames = bytearray()
    for semitone in _MELODIES[melody]:
        freq = 440.0 * 2 ** (semitone / 12)
        for n in range(per_beat):
            t = n / rate
            envelope = min(1.0, n / (0.01 * rate)) * math.exp(-3.0 * t / beat)
            sample = 0.6 * math.sin(2 * math.pi * freq * t) + 0.2 * math.sin(4 * math.pi * freq * t)
            frames += struct.pack("<h", int(max(-1.0, min(1.0, sample * envelope)) * 32000))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(bytes(frames))
    seconds = round(len(_MELODIES[melody]) * per_beat / rate, 3)
    ctx.write(
        "tone.wav",
        buf.getvalue(),
        kind="studio.wav",
        media_type="audio/wav",
        presentation="audio",
        title=f"{melody} at {bpm} bpm",
    )
    return _free({"seconds": seconds, "sample_rate": rate})


def _frame(i: int, total: int, size: tuple[int, int], title: str, font: Any) -> Image.Image:
    width, height = size
    phase = i / max(total - 1, 1)
    image = Image.new("RGB", (width, height), (18, 24, 48))
    draw = ImageDraw.Draw(image)
    for k in range(5):
        x = (phase * 1.5 + k / 5) % 1.0 * (width + 60) - 30
        y = height * (0.25 + 0.5 * (0.5 + 0.5 * math.sin(2 * math.pi * (phase + k / 5))))
        r = 10 + 4 * k
        draw.ellipse([x - r, y - r, x + r, y + r], fill=(240 - 30 * k, 120 + 20 * k, 60 + 35 * k))
    box = draw.textbbox((0, 0), title, font=font)
    draw.text(((width - (box[2] - box[0])) // 2, height // 10), title, font=font, fill="white")
    bar = int(width * (i + 1) / total)
    draw.rectangle([0, height - 6, bar, height], fill=(250, 200, 40))
    return image


def clip(ctx: kit.Context) -> kit.Outcome:
    ffmpeg = ctx.binary("ffmpeg")
    title = str(ctx.input.get("title", "murmur-nb"))
    seconds = float(ctx.input.get("seconds", 3))
    fps = int(ctx.input.get("fps", 12))
    width = int(ctx.input.get("width", 320)) // 2 * 2  # H.264 with yuv420p needs even sizes
    height = int(ctx.input.get("height", 180)) // 2 * 2
    total = max(1, round(seconds * fps))
    out_dir = ctx.root("out", mode="rw")
    target = out_dir / "clip.mp4"
    deadline_ms = int(ctx.request.get("deadline_ms") or 60_000)
    font = ImageFont.load_default(size=max(10, height // 8))
    command = [
        ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
        "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width}x{height}", "-r", str(fps),
        "-i", "pipe:0",
        # swscale's RGB to YUV conversion picks SIMD code by processor unless it is bitexact:
        # without it the same frames gave other bytes on another machine (and with
        # ``-cpuflags 0`` here)
        "-sws_flags", "bitexact+accurate_rnd",
        "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-threads", "1",
        "-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1",
        "-movflags", "+faststart", str(target),
    ]  # fmt: skip
    raw = b"".join(_frame(i, total, (width, height), title, font).tobytes() for i in range(total))
    try:
        proc = subprocess.run(
            command,
            input=raw,
            capture_output=True,
            env={},
            cwd=out_dir,
            timeout=max(1.0, deadline_ms / 1000 * 0.9),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise kit.Failure("encode_timeout", "ffmpeg did not finish within the deadline",
                          retryable=True) from exc
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace")[-400:]
        raise kit.Failure(
            "encode_failed",
            f"ffmpeg exited with status {proc.returncode}: {tail.strip()}",
            details={"status": proc.returncode},
        )
    data = target.read_bytes()
    ctx.write(
        "clip.mp4",
        data,
        kind="studio.mp4",
        media_type="video/mp4",
        presentation="video",
        title=f"{title} ({total} frames at {fps} fps)",
    )
    return _free({"frames": total, "seconds": round(total / fps, 3)})


def _job_dir(ctx: kit.Context, job: str) -> Path:
    return ctx.root("jobs", mode="rw") / "storyboard" / job


def storyboard(ctx: kit.Context) -> kit.Outcome:
    title = str(ctx.input.get("title", "murmur-nb in a minute"))
    raw_scenes = ctx.input.get("scenes", _DEFAULT_SCENES)
    scenes = [str(s) for s in raw_scenes] if isinstance(raw_scenes, list) else []
    if not scenes:
        raise kit.Failure("invalid_input", "'scenes' needs at least one scene")
    spec = {
        "title": title,
        "scenes": scenes,
        "seconds_per_scene": float(ctx.input.get("seconds_per_scene", 4)),
    }
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()
    job = hashlib.sha256(canonical).hexdigest()[:16]
    folder = _job_dir(ctx, job)
    folder.mkdir(parents=True, exist_ok=True)
    # Submitting the same storyboard again restarts its job, so a re-run notebook replays.
    for old in folder.glob("panel-*.png"):
        old.unlink()
    (folder / "spec.json").write_bytes(canonical)
    (folder / "state.json").write_text(json.dumps({"done": 0}))
    return _free(
        {
            "job": job,
            "state": "running",
            "done": 0,
            "total": len(scenes),
            "poll_capability": "studio.storyboard_status",
        }
    )


def _panel(index: int, scene: str, total: int) -> Image.Image:
    image = Image.new("RGB", (320, 180), (240, 236, 226))
    draw = ImageDraw.Draw(image)
    draw.rectangle([6, 6, 313, 173], outline=(60, 60, 60), width=2)
    hue = index / max(total, 1)
    colour = (int(80 + 150 * hue), int(160 - 60 * hue), int(200 - 120 * hue))
    draw.ellipse([24, 40, 124, 140], fill=colour)
    draw.text((140, 60), f"Scene {index + 1}", font=ImageFont.load_default(size=20), fill="black")
    draw.text((140, 96), scene[:26], font=ImageFont.load_default(size=13), fill=(40, 40, 40))
    return image


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def storyboard_status(ctx: kit.Context) -> kit.Outcome:
    job = str(ctx.input.get("job", ""))
    folder = _job_dir(ctx, job)
    if not (folder / "spec.json").is_file():
        raise kit.Failure(
            "unknown_job",
            f"storyboard job {job!r} is not in the 'jobs' root; start it with "
            "studio.storyboard, and make sure the host maps the 'jobs' root to a folder that "
            "persists between calls (an unmapped write root is fresh on every call)",
            details={"job": job},
        )
    spec = json.loads((folder / "spec.json").read_text())
    state = json.loads((folder / "state.json").read_text())
    scenes: list[str] = spec["scenes"]
    done = int(state["done"])
    if done < len(scenes):  # one unit of real work per poll: render the next scene
        (folder / f"panel-{done + 1:02d}.png").write_bytes(_png(_panel(done, scenes[done],
                                                                       len(scenes))))
        done += 1
        (folder / "state.json").write_text(json.dumps({"done": done}))
    result = {"job": job, "state": "running", "done": done, "total": len(scenes)}
    if done < len(scenes):
        return _free(result)
    result["state"] = "done"
    _write_storyboard(ctx, folder, spec)
    return _free(result)


def _write_storyboard(ctx: kit.Context, folder: Path, spec: dict[str, Any]) -> None:
    """The finished job's artifacts: its timeline, its slides and a contact sheet of panels."""
    scenes: list[str] = spec["scenes"]
    seconds = float(spec["seconds_per_scene"])
    ctx.write(
        "storyboard/timeline.json",
        (json.dumps({"events": _timeline(scenes, seconds)}, indent=2) + "\n").encode(),
        kind="studio.timeline",
        media_type="application/json",
        presentation="timeline",
        title=f"{spec['title']}: timeline",
    )
    slides = [f"# {spec['title']}\n\n{len(scenes)} scenes, {len(scenes) * seconds:g} seconds\n"]
    slides += [
        f"## Scene {i + 1}\n\n{scene}\n\n- starts at {i * seconds:g} s\n- lasts {seconds:g} s\n"
        for i, scene in enumerate(scenes)
    ]
    ctx.write(
        "storyboard/slides.md",
        "\n---\n\n".join(slides).encode(),
        kind="studio.slides",
        media_type="text/markdown",
        presentation="slides",
        title=f"{spec['title']}: slides",
    )
    ctx.write(
        "storyboard/contact-sheet.png",
        _contact_sheet(folder, len(scenes)),
        kind="studio.png",
        media_type="image/png",
        presentation="image",
        title=f"{spec['title']}: contact sheet",
    )


def _timeline(scenes: list[str], seconds: float) -> list[dict[str, Any]]:
    """Picture and caption lanes, one event per scene, under a music bed and a closing sting."""
    events: list[dict[str, Any]] = []
    for i, scene in enumerate(scenes):
        start = i * seconds
        events.append({"start": start, "end": start + seconds, "label": scene, "lane": "picture"})
        events.append(
            {"start": start + 0.5, "end": start + seconds - 0.5, "label": f"Caption: {scene}",
             "lane": "captions"}
        )
    events.append({"start": 0, "end": len(scenes) * seconds, "label": "Music bed", "lane": "sound"})
    events.append({"start": len(scenes) * seconds - 1, "label": "Sting", "lane": "sound"})
    return events


def _contact_sheet(folder: Path, count: int) -> bytes:
    """The job's ``count`` rendered panels, four to a row, as one PNG."""
    panels = [Image.open(folder / f"panel-{i + 1:02d}.png") for i in range(count)]
    columns = min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    sheet = Image.new("RGB", (columns * 320, rows * 180), "white")
    for i, panel in enumerate(panels):
        sheet.paste(panel, ((i % columns) * 320, (i // columns) * 180))
    return _png(sheet)


HANDLERS: dict[str, kit.Handler] = {
    "studio.tone": tone,
    "studio.clip": clip,
    "studio.storyboard": storyboard,
    "studio.storyboard_status": storyboard_status,
}


def main(argv: list[str]) -> int:
    return kit.run(DESCRIPTOR, HANDLERS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

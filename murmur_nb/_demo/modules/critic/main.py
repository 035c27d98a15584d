"""Demo module ``critic``: reviews an image another module produced (cross-module handoff).

The image arrives the only way a module may receive another module's file: the host stages
the producer's artifact into its content-addressed store and supplies that store as a
read-only root; the input names the root and the path inside it
(``{"image": {"root": "staged", "path": "..."}}``). The critic never learns the producer's
layout.

``critic.review`` is local and free: it measures the image and writes a Markdown review, a
JSON of the measurements and an annotated copy. (The paid second opinion lives in its own
module, ``oracle``, because declaring a paid provider puts every capability of a module under
approval.)
"""

from __future__ import annotations

import io
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from murmur_nb._demo.modules import _kit as kit
else:  # the installed module folder carries its own copy of the kit
    import _kit as kit

from PIL import Image, ImageDraw, ImageStat

MODULE = "critic"

_IMAGE_REF = {
    "type": "object",
    "description": "Where the image is: a root the host supplied to this call, and a path in it.",
    "properties": {
        "root": {"type": "string", "minLength": 1, "default": "staged"},
        "path": {"type": "string", "minLength": 1},
    },
    "required": ["root", "path"],
    "additionalProperties": False,
}


def _request() -> dict[str, Any]:
    return {
        "$schema": kit.SCHEMA_DIALECT,
        "type": "object",
        "properties": {"image": _IMAGE_REF},
        "required": ["image"],
        "additionalProperties": False,
    }


DESCRIPTOR: dict[str, Any] = {
    "module": MODULE,
    "name": "Critic",
    "version": "1.0.0",
    "protocol_versions": [kit.PROTOCOL_ID],
    "capabilities": [
        kit.capability(
            "critic.review",
            "Review an image",
            "Measure a staged image: size, colour, contrast; Markdown, JSON, annotated copy.",
            artifacts=["critic.notes", "critic.measurements", "critic.annotated"],
            skills=["critic.reviewing"],
        ),
    ],
    "request_schemas": {
        "critic.review.request": _request(),
    },
    "result_schemas": {
        "critic.review.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "width": {"type": "integer"},
                "height": {"type": "integer"},
                "brightness": {"type": "number"},
                "contrast": {"type": "number"},
                "verdict": {"type": "string"},
            },
            "required": ["width", "height", "brightness", "contrast", "verdict"],
        },
    },
    "artifact_schemas": {
        "critic.notes": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "text/markdown"},
        "critic.measurements": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "histogram": {"type": "array", "items": {"type": "integer"}},
                "dominant": {"type": "array", "items": {"type": "string"}},
            },
        },
        "critic.annotated": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "image/png"},
    },
    "agent_overlays": [],
    "skills": [
        {
            "id": "critic.reviewing",
            "title": "Reviewing an image",
            "summary": "What the critic measures and how to hand it a staged artifact.",
            "path": "skills/reviewing.md",
            "digest": "sha256:362e79ce632893a25c4ef6ee7da2a0add34425ba1cd7ff78aa2fcb3e511d13e7",
            "tokens": 110,
        }
    ],
    "permissions": {
        "filesystem_read": ["staged"],
        "filesystem_write": ["out"],
        "network": [],
        "credentials": [],
        "paid_providers": [],
        "publish": False,
        "subprocess": [],
    },
    "requirements": [],
}


def _load(ctx: kit.Context) -> tuple[Image.Image, str]:
    ref = ctx.input.get("image")
    if not isinstance(ref, dict):
        raise kit.Failure("invalid_input", "'image' must be {'root': ..., 'path': ...}")
    data = ctx.read_file(ref)
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (OSError, ValueError) as exc:
        raise kit.Failure(
            "unreadable_image", f"{ref.get('path')!r} is not an image Pillow can read: {exc}"
        ) from exc
    return image.convert("RGB"), str(ref.get("path"))


def _measure(image: Image.Image) -> dict[str, Any]:
    grey = image.convert("L")
    stat = ImageStat.Stat(grey)
    histogram = grey.histogram()
    bins = [sum(histogram[i : i + 16]) for i in range(0, 256, 16)]
    small = image.quantize(colors=4, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    palette = small.getpalette() or []
    # A "P" image's colours are (count, palette index) pairs.
    counts = sorted(
        ((n, i) for n, i in small.getcolors() or [] if isinstance(i, int)), reverse=True
    )
    dominant = [
        "#{:02x}{:02x}{:02x}".format(*palette[3 * index : 3 * index + 3]) for _, index in counts
    ]
    mean = ImageStat.Stat(image).mean
    return {
        "width": image.width,
        "height": image.height,
        "mean_rgb": [round(c, 2) for c in mean],
        "brightness": round(stat.mean[0] / 255, 4),
        "contrast": round(stat.stddev[0] / 128, 4),
        "histogram": bins,
        "dominant": dominant,
    }


def _verdict(m: dict[str, Any]) -> str:
    tone = "dark" if m["brightness"] < 0.35 else "bright" if m["brightness"] > 0.7 else "balanced"
    punch = "flat" if m["contrast"] < 0.2 else "punchy" if m["contrast"] > 0.45 else "moderate"
    return f"{tone} exposure, {punch} contrast"


def review(ctx: kit.Context) -> kit.Outcome:
    image, path = _load(ctx)
    m = _measure(image)
    verdict = _verdict(m)
    md = [
        f"# Review of `{path}`\n",
        f"**Verdict:** {verdict}.\n",
        "| measure | value |",
        "| --- | --- |",
        f"| size | {m['width']} x {m['height']} |",
        f"| brightness | {m['brightness']:.2f} |",
        f"| contrast | {m['contrast']:.2f} |",
        f"| mean colour | rgb({', '.join(f'{c:.0f}' for c in m['mean_rgb'])}) |",
        f"| dominant colours | {', '.join(m['dominant'])} |",
        "",
    ]
    ctx.write("review/review.md", "\n".join(md).encode(), kind="critic.notes",
              media_type="text/markdown", presentation="markdown", title=f"Review: {verdict}")
    ctx.write("review/measurements.json", (json.dumps(m, indent=2) + "\n").encode(),
              kind="critic.measurements", media_type="application/json", presentation="json",
              title="Measurements")
    strip = 40
    annotated = Image.new("RGB", (image.width, image.height + strip), "white")
    annotated.paste(image, (0, 0))
    draw = ImageDraw.Draw(annotated)
    peak = max(m["histogram"]) or 1
    bar_w = image.width / len(m["histogram"])
    for i, count in enumerate(m["histogram"]):
        h = round((strip - 4) * count / peak)
        if h == 0:
            continue
        x0 = round(i * bar_w)
        draw.rectangle([x0, image.height + strip - h, round(x0 + bar_w) - 1,
                        image.height + strip - 1], fill=(i * 16, i * 16, i * 16))
    for i, colour in enumerate(m["dominant"]):
        draw.rectangle([4 + 14 * i, 4, 14 + 14 * i, 14], fill=colour, outline="white")
    buf = io.BytesIO()
    annotated.save(buf, format="PNG")
    ctx.write("review/annotated.png", buf.getvalue(), kind="critic.annotated",
              media_type="image/png", presentation="image", title="Annotated with histogram")
    return kit.Outcome(
        {"width": m["width"], "height": m["height"], "brightness": m["brightness"],
         "contrast": m["contrast"], "verdict": verdict},
        estimated_cost=0.0,
        actual_cost=0.0,
    )


HANDLERS: dict[str, kit.Handler] = {
    "critic.review": review,
}


def main(argv: list[str]) -> int:
    return kit.run(DESCRIPTOR, HANDLERS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

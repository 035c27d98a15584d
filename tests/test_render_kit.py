"""Real media for the rendering tests, and checks that the media really are what they claim.

Every file here is produced by the library that owns its format: PNG/JPEG/PDF by Pillow, WAV
by the stdlib ``wave`` module, MP4 by the ffmpeg binary shipped in ``imageio-ffmpeg``,
Parquet by pyarrow. Artifacts are made by the host's own ``verify_artifact`` and ``rejection``
(internal, imported on purpose) over a real root, so what the renderer receives is exactly
what an invocation would hand it, without running a module process for every test file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import wave
from pathlib import Path
from typing import Any

from murmur_nb import ArtifactRejected, Invocation, RejectedArtifact, VerifiedArtifact
from murmur_nb._files.artifacts import (  # private: artifacts without a module run
    rejection,
    verify_artifact,
)
from murmur_nb.protocol import Artifact, Request, Root

ROOT_NAME = "out"


def digest_of(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def make_png(path: Path, size: tuple[int, int] = (320, 200), seed: int = 0) -> Path:
    from PIL import Image, ImageDraw

    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", size, ((seed * 47) % 256, (seed * 91) % 256, 160))
    draw = ImageDraw.Draw(image)
    w, h = size
    for i in range(6):
        draw.ellipse(
            (
                i * w // 8,
                (seed + i) % 5 * h // 8,
                i * w // 8 + w // 4,
                (seed + i) % 5 * h // 8 + h // 3,
            ),
            fill=((seed * 13 + i * 40) % 256, (i * 70) % 256, (seed * 29) % 256),
        )
    image.save(path, format="PNG")
    return path


def make_jpeg(path: Path, size: tuple[int, int] = (640, 480), seed: int = 0) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.linear_gradient("L").resize(size).convert("RGB")
    image.paste(
        ((seed * 53) % 256, 90, 200), (size[0] // 4, size[1] // 4, size[0] // 2, size[1] // 2)
    )
    image.save(path, format="JPEG", quality=90)
    return path


def make_pdf(path: Path, pages: int = 3) -> Path:
    from PIL import Image, ImageDraw

    path.parent.mkdir(parents=True, exist_ok=True)
    images = []
    for n in range(pages):
        page = Image.new("RGB", (595, 842), "white")
        draw = ImageDraw.Draw(page)
        draw.rectangle((60, 60, 535, 200), fill=(30 + n * 60, 80, 160))
        draw.text((80, 240), f"Page {n + 1}", fill="black")
        images.append(page)
    images[0].save(path, format="PDF", save_all=True, append_images=images[1:], resolution=72.0)
    return path


def make_wav(path: Path, seconds: float = 0.5, rate: int = 8000) -> Path:
    import math
    import struct

    path.parent.mkdir(parents=True, exist_ok=True)
    frames = b"".join(
        struct.pack("<h", int(12000 * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(int(seconds * rate))
    )
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)
    return path


def ffmpeg() -> str:
    import imageio_ffmpeg

    return str(imageio_ffmpeg.get_ffmpeg_exe())


def make_mp4(path: Path, seconds: int = 1) -> Path:
    """A real H.264 MP4 drawn by ffmpeg's test source (no network, no input file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            ffmpeg(),
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            f"testsrc=size=96x64:rate=10:duration={seconds}",
            "-pix_fmt",
            "yuv420p",
            "-c:v",
            "libx264",
            "-bitexact",
            str(path),
        ],
        check=True,
        capture_output=True,
    )
    return path


def make_csv(path: Path, rows: int, sep: str = ",") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [sep.join(["n", "square", "name"])]
    lines += [sep.join([str(i), str(i * i), f"row-{i}"]) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_parquet(path: Path, rows: int, row_group_size: int = 1000) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"n": list(range(rows)), "label": [f"r{i}" for i in range(rows)]})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def artifact(
    root: Path,
    rel: str,
    media_type: str,
    presentation: str = "",
    title: str = "",
    *,
    artifact_id: str | None = None,
) -> VerifiedArtifact:
    """The host's VerifiedArtifact for ``root/rel``, verified by the host's own code."""
    file = root / rel
    claim = Artifact(
        id=artifact_id or rel.replace("/", "-"),
        kind="test.file",
        path=rel,
        root=ROOT_NAME,
        presentation=presentation,
        media_type=media_type,
        bytes=file.stat().st_size,
        digest=digest_of(file),
        title=title,
    )
    return verify_artifact(claim, {ROOT_NAME: Root(path=str(root), mode="rw")})


def rejected(root: Path, rel: str, media_type: str, wrong_digest: str) -> RejectedArtifact:
    """A RejectedArtifact exactly as the host reports one (digest claim that does not match)."""
    file = root / rel
    claim = Artifact(
        id=rel.replace("/", "-"),
        kind="test.file",
        path=rel,
        root=ROOT_NAME,
        media_type=media_type,
        bytes=file.stat().st_size,
        digest=wrong_digest,
    )
    try:
        verify_artifact(claim, {ROOT_NAME: Root(path=str(root), mode="rw")})
    except ArtifactRejected as exc:
        return rejection(claim, exc)
    raise AssertionError("the claim unexpectedly verified")


def invocation(
    root: Path,
    artifacts: list[VerifiedArtifact],
    rejected_artifacts: list[RejectedArtifact] | None = None,
) -> Invocation:
    """The host's own Invocation record, as ``ModuleHost.invoke`` returns it."""
    request = Request(
        capability="testmod.run",
        request_id="req-0001",
        roots={ROOT_NAME: Root(path=str(root), mode="rw")},
    )
    return Invocation(
        module="testmod",
        capability="testmod.run",
        request=request,
        ok=True,
        artifacts=artifacts,
        rejected_artifacts=rejected_artifacts or [],
    )


# --- the media are real -------------------------------------------------------------------


def test_generated_media_are_real_files(tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    import pypdfium2 as pdfium
    from PIL import Image

    with Image.open(make_png(tmp_path / "a.png")) as im:
        assert im.format == "PNG" and im.size == (320, 200)
    with Image.open(make_jpeg(tmp_path / "a.jpg")) as im:
        assert im.format == "JPEG"
    pdf = pdfium.PdfDocument(str(make_pdf(tmp_path / "a.pdf", pages=4)))
    assert len(pdf) == 4
    pdf.close()
    with wave.open(str(make_wav(tmp_path / "a.wav", seconds=0.25)), "rb") as w:
        assert w.getnframes() == 2000
    mp4 = make_mp4(tmp_path / "a.mp4")
    assert mp4.read_bytes()[4:8] == b"ftyp"
    assert pq.ParquetFile(make_parquet(tmp_path / "a.parquet", 10)).metadata.num_rows == 10


def test_artifact_helper_goes_through_host_verification(tmp_path: Path) -> None:
    make_png(tmp_path / "img" / "a.png")
    art = artifact(tmp_path, "img/a.png", "image/png", "image")
    assert art.file == (tmp_path / "img" / "a.png").resolve()
    rej = rejected(tmp_path, "img/a.png", "image/png", "sha256:" + "0" * 64)
    assert rej.code == "digest_mismatch"

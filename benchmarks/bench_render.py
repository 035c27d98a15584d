"""Benchmark rendering: a 500-image grid and a 200 MB video artifact.

Prints the time to render one invocation holding 500 ``image_grid`` PNGs (each re-verified,
thumbnailed and embedded within the grid budget) and the size of its mimebundle, then the
time and bundle size for a 200 MB MP4 (a real ffmpeg-made header followed by zeros, sparse
on disk), which must be linked, never embedded. Sizes: MB = 10**6 bytes, kB = 10**3 bytes.

Last line: ``grid500_s=<x> grid500_mb=<y> video_bundle_kb=<z>``.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import murmur_nb as mnb
from murmur_nb._files.artifacts import verify_artifact
from murmur_nb.protocol import Artifact, Request, Root

N_IMAGES = 500
VIDEO_BYTES = 200 * 1024 * 1024
ROOT = "out"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _paint(path: Path, i: int) -> None:
    from PIL import Image, ImageDraw

    w, h = 640, 480
    img = Image.linear_gradient("L").resize((w, h)).convert("RGB")
    draw = ImageDraw.Draw(img)
    for k in range(8):
        x, y = (i * 37 + k * 71) % w, (i * 53 + k * 29) % h
        colour = ((i * 11 + k * 40) % 256, (i * 7 + k * 90) % 256, (k * 30 + i) % 256)
        draw.ellipse((x - 60, y - 40, x + 60, y + 40), fill=colour)
    draw.text((20, 20), f"frame {i}", fill="white")
    img.save(path, format="PNG")


def _artifact(root: Path, rel: str, media_type: str, presentation: str) -> mnb.VerifiedArtifact:
    file = root / rel
    claim = Artifact(
        id=rel,
        kind="bench",
        path=rel,
        root=ROOT,
        presentation=presentation,
        media_type=media_type,
        bytes=file.stat().st_size,
        digest=_digest(file),
    )
    return verify_artifact(claim, {ROOT: Root(path=str(root), mode="rw")})


def _bundle_bytes(r: mnb.Rendering) -> int:
    return sum(len(v.encode("utf-8")) for v in r._repr_mimebundle_().values())


def _video_header(path: Path) -> None:
    import imageio_ffmpeg

    subprocess.run(
        [
            imageio_ffmpeg.get_ffmpeg_exe(),
            "-hide_banner", "-loglevel", "error", "-y",
            "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=2",
            "-pix_fmt", "yuv420p", "-c:v", "libx264", str(path),
        ],
        check=True,
    )  # fmt: skip


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
        root = Path(tmp)
        frames = root / "frames"
        frames.mkdir()
        for i in range(N_IMAGES):
            _paint(frames / f"f{i:03}.png", i)
        arts = [
            _artifact(root, f"frames/f{i:03}.png", "image/png", "image_grid")
            for i in range(N_IMAGES)
        ]
        inv = mnb.Invocation(
            module="bench",
            capability="bench.grid",
            request=Request(
                capability="bench.grid",
                request_id="bench",
                roots={ROOT: Root(path=str(root), mode="rw")},
            ),
            ok=True,
            artifacts=arts,
        )
        source_mb = sum(a.bytes for a in arts) / 1e6
        t0, c0 = time.perf_counter(), time.process_time()
        grid = mnb.render(inv)
        grid_s = time.perf_counter() - t0
        grid_cpu = time.process_time() - c0
        grid_mb = _bundle_bytes(grid) / 1e6
        assert grid.parts[0].primitive == "image_grid", grid.text[:200]
        embedded = grid.html.count("data:image/jpeg;base64,")
        print(
            f"grid: {N_IMAGES} PNGs 640x480 ({source_mb:.1f} MB on disk), "
            f"{embedded} thumbnails embedded, render {grid_s:.2f} s wall ({grid_cpu:.2f} s CPU), "
            f"bundle {grid_mb:.2f} MB"
        )

        video = root / "big.mp4"
        _video_header(video)
        header = video.stat().st_size
        with video.open("r+b") as fh:
            fh.truncate(VIDEO_BYTES)  # sparse zeros after a real MP4
        art = _artifact(root, "big.mp4", "video/mp4", "video")
        t0 = time.perf_counter()
        rendered = mnb.render(art, budget=mnb.RenderBudget(link_base=root))
        video_s = time.perf_counter() - t0
        video_kb = _bundle_bytes(rendered) / 1e3
        assert rendered.primitive == "video" and "data:video" not in rendered.html
        print(
            f"video: {VIDEO_BYTES / 2**20:.0f} MiB MP4 ({header} B real header, sparse rest), "
            f"linked; render {video_s:.2f} s (of which re-verifying the digest is nearly all), "
            f"bundle {video_kb:.2f} kB"
        )
    print(f"grid500_s={grid_s:.2f} grid500_mb={grid_mb:.2f} video_bundle_kb={video_kb:.2f}")


if __name__ == "__main__":
    sys.exit(main())

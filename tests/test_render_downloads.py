"""Downloads written beside the notebook (``RenderBudget.download_dir``) and linked relatively.

JupyterLab removes ``href="data:..."`` from a notebook it does not trust but keeps relative
links; the browser side is in ``tests/test_browser_gallery.py``. Here: what is written, where,
under which name, that a second render reuses the file, and what happens when the folder
cannot be written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _users import run_as_test_user
from bs4 import BeautifulSoup
from test_render_kit import artifact, make_pdf

import murmur_nb as mnb


def _zip(path: Path, size: int = 5000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x03\x04" + os.urandom(size - 4))
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_download_is_written_by_digest_and_linked_relatively(tmp_path: Path) -> None:
    store, notebook = tmp_path / "store", tmp_path / "nb"
    data = _zip(store / "out" / "report bundle.zip").read_bytes()
    art = artifact(store, "out/report bundle.zip", "application/zip", "download")
    budget = mnb.RenderBudget(download_dir="downloads", link_base=notebook)
    r = mnb.render(art, budget=budget)
    link = BeautifulSoup(r.html, "html.parser").select_one("a[href]")
    assert link is not None
    name = f"{_sha(data)[:16]}-report_bundle.zip"
    assert link["href"] == f"downloads/{name}"  # relative: survives JupyterLab's sanitizer
    assert link["download"] == "report bundle.zip"  # trusted pages still save it by its name
    assert (notebook / "downloads" / name).read_bytes() == data
    assert "data:" not in r.html
    assert "download report bundle.zip (written to downloads/)" in r.text
    # the same content again: the file is reused, not rewritten
    before = (notebook / "downloads" / name).stat()
    again = mnb.render(art, budget=budget)
    assert again.html == r.html
    after = (notebook / "downloads" / name).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(p.name for p in (notebook / "downloads").iterdir()) == [name]


def test_a_tampered_copy_in_the_folder_is_replaced(tmp_path: Path) -> None:
    data = _zip(tmp_path / "a.zip").read_bytes()
    budget = mnb.RenderBudget(download_dir=tmp_path / "dl", link_base=tmp_path)
    mnb.render(artifact(tmp_path, "a.zip", "application/zip"), budget=budget)
    written = next((tmp_path / "dl").iterdir())
    written.write_bytes(b"not the file")
    mnb.render(artifact(tmp_path, "a.zip", "application/zip"), budget=budget)
    assert written.read_bytes() == data


def test_the_document_download_uses_the_folder_too(tmp_path: Path) -> None:
    data = make_pdf(tmp_path / "report.pdf").read_bytes()
    budget = mnb.RenderBudget(download_dir="dl", link_base=tmp_path)
    r = mnb.render(artifact(tmp_path, "report.pdf", "application/pdf", "document"), budget=budget)
    link = BeautifulSoup(r.html, "html.parser").select_one("a[download]")
    assert link is not None and link["href"] == f"dl/{_sha(data)[:16]}-report.pdf"
    assert (tmp_path / str(link["href"])).read_bytes() == data
    assert "download written to dl/" in r.text


def test_past_the_embed_budget_nothing_is_copied(tmp_path: Path) -> None:
    _zip(tmp_path / "big.zip", 5000)
    budget = mnb.RenderBudget(download_dir="dl", link_base=tmp_path, embed_bytes=1000)
    r = mnb.render(artifact(tmp_path, "big.zip", "application/zip"), budget=budget)
    link = BeautifulSoup(r.html, "html.parser").select_one("a[download]")
    assert link is not None and link["href"] == "big.zip"  # the file where it is
    assert not (tmp_path / "dl").exists()
    assert "linked, not embedded" in r.text


def test_without_the_option_a_download_is_embedded(tmp_path: Path) -> None:
    _zip(tmp_path / "a.zip")
    r = mnb.render(artifact(tmp_path, "a.zip", "application/zip"))
    link = BeautifulSoup(r.html, "html.parser").select_one("a[download]")
    assert link is not None and str(link["href"]).startswith("data:application/zip;base64,")


def test_an_unwritable_folder_is_an_error_card_that_says_what_to_do(tmp_path: Path) -> None:
    _zip(tmp_path / "a.zip")
    (tmp_path / "taken").write_text("a file where the folder should be")
    budget = mnb.RenderBudget(download_dir="taken", link_base=tmp_path)
    r = mnb.render(artifact(tmp_path, "a.zip", "application/zip"), budget=budget)
    assert r.error_code == "render_failed"
    assert "writing" in r.text and "taken" in r.text and "RenderBudget.download_dir" in r.text
    assert (tmp_path / "taken").read_text() == "a file where the folder should be"


def test_an_empty_folder_name_is_refused() -> None:
    with pytest.raises(ValueError, match="download_dir"):
        mnb.RenderBudget(download_dir=" ")


@pytest.fixture
def project() -> Iterator[Path]:
    """A project folder other accounts may pass through (``0755``, as git makes folders;
    ``tmp_path`` is this account's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="mnb-project-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _written_with_umask(umask: int, source: Path, project: Path) -> Path:
    """``source`` rendered with ``download_dir`` in ``project`` by this process under
    ``umask``: the copy written."""
    before = os.umask(umask)
    try:
        budget = mnb.RenderBudget(download_dir=project / "downloads", link_base=project)
        r = mnb.render_file(source, "application/octet-stream", budget=budget)
    finally:
        os.umask(before)
    assert "written to" in r.text, r.text
    return project / "downloads" / f"{_sha(source.read_bytes())[:16]}-{source.name}"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to read as another account")
def test_a_copy_keeps_to_the_kernels_umask_and_another_account_cannot_read_it(
    tmp_path: Path, project: Path
) -> None:
    """A red-team trial: a kernel with umask ``077`` rendered a private file with
    ``download_dir`` in a project folder with ``0755`` folders; the copy was ``0644`` and
    another account read it. Now it gets the mode a plain ``open(path, "w")`` gives."""
    (project / "downloads").mkdir(mode=0o755)
    (tmp_path / "private.bin").write_bytes(b"the victim's private bytes")
    (tmp_path / "shared.bin").write_bytes(b"meant to be read")
    private = _written_with_umask(0o077, tmp_path / "private.bin", project)
    shared = _written_with_umask(0o022, tmp_path / "shared.bin", project)
    done = run_as_test_user(["/bin/cat", str(shared), str(private)], project / "user")
    assert "meant to be read" in done.stdout, done.stderr  # the account reaches the folder
    assert "private bytes" not in done.stdout
    assert "Permission denied" in done.stderr, done.stderr
    assert (private.stat().st_mode & 0o777, shared.stat().st_mode & 0o777) == (0o600, 0o644)

"""LocalStore: atomic writes, content-addressed names never hold other bytes."""
import os

import pytest

from notebook_builder.cells.c00_config import IntegrityError, StoreError, StoreQuotaExceeded
from notebook_builder.cells.c20_store import LocalStore


def test_write_read_list_and_exists(tmp_path):
    store = LocalStore(tmp_path / "s")
    store.write_bytes("pdf_by_hash/ab.pdf", b"%PDF-1")
    store.write_bytes("status.json", b"{}")
    assert store.exists("pdf_by_hash/ab.pdf") and not store.exists("pdf_by_hash/cd.pdf")
    assert store.read_file("pdf_by_hash/ab.pdf") == b"%PDF-1"
    assert store.size("status.json") == 2 and store.size("nope") is None
    assert store.list_dir("") == ["status.json"]
    assert store.list_dir("pdf_by_hash") == ["pdf_by_hash/ab.pdf"]


def test_content_addressed_name_refuses_other_bytes_but_accepts_same(tmp_path):
    store = LocalStore(tmp_path)
    local = tmp_path / "x.pdf"
    local.write_bytes(b"one")
    store.upload_file("text/aa.txt", local)
    store.upload_file("text/aa.txt", local)  # same bytes: a no-op
    local.write_bytes(b"two")
    with pytest.raises(IntegrityError):
        store.upload_file("text/aa.txt", local)
    with pytest.raises(IntegrityError):
        store.write_bytes("pdf_by_hash/zz.pdf", b"a") or store.write_bytes("pdf_by_hash/zz.pdf", b"b")
    assert store.read_file("text/aa.txt") == b"one"
    store.write_bytes("status.json", b"1")
    store.write_bytes("status.json", b"2")  # mutable names may change
    assert store.read_file("status.json") == b"2"


@pytest.mark.parametrize("name", ["/etc/passwd", "../x", "a/../../b", "", "a//b"])
def test_names_outside_the_store_are_refused(tmp_path, name):
    with pytest.raises(StoreError):
        LocalStore(tmp_path).write_bytes(name, b"x")


def test_failed_write_leaves_old_bytes_and_no_temp(tmp_path, monkeypatch):
    store = LocalStore(tmp_path)
    store.write_bytes("status.json", b"old")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StoreQuotaExceeded):
        store.write_bytes("status.json", b"new")
    assert store.read_file("status.json") == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]


def test_read_only_store_directory_gives_a_clear_error(tmp_path, monkeypatch):
    root = tmp_path / "ro"
    store = LocalStore(root)
    root.chmod(0o500)
    if os.geteuid() == 0:  # root ignores the mode bits: refuse the way a read-only mount does
        import tempfile

        def read_only(*args, **kwargs):
            raise OSError(30, "Read-only file system")
        monkeypatch.setattr(tempfile, "mkstemp", read_only)
    try:
        with pytest.raises(StoreError, match="cannot write status.json") as caught:
            store.write_bytes("status.json", b"x")
        assert not isinstance(caught.value, StoreQuotaExceeded)
    finally:
        root.chmod(0o700)
    assert list(root.iterdir()) == []

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
        from notebook_builder.cells import c20_store

        def read_only(*args, **kwargs):
            raise OSError(30, "Read-only file system")
        monkeypatch.setattr(c20_store, "_store_create_temp", read_only)
    try:
        with pytest.raises(StoreError, match="cannot write status.json") as caught:
            store.write_bytes("status.json", b"x")
        assert not isinstance(caught.value, StoreQuotaExceeded)
    finally:
        root.chmod(0o700)
    assert list(root.iterdir()) == []


# ------------------------------------------------------- group uploads


def _locals(tmp_path, count):
    folder = tmp_path / "workspace"
    folder.mkdir(exist_ok=True)
    files = []
    for number in range(count):
        path = folder / f"{number}.txt"
        path.write_bytes(f"text {number}".encode())
        files.append((f"text/{number:064x}.txt", path))
    return files


def test_a_group_upload_shows_no_name_before_the_group_is_durable(tmp_path, monkeypatch):
    from notebook_builder.cells import c05_durable
    store = LocalStore(tmp_path / "s")
    items = _locals(tmp_path, 5)
    synced = []

    def sync_files(paths):
        paths = list(paths)
        # at the one flush: every file is written under its temp name, none under its own name
        assert not any(store.exists(name) for name, _ in items)
        assert sorted(open(p, "rb").read() for p in paths) == sorted(p.read_bytes() for _, p in items)
        synced.append(len(paths))
    monkeypatch.setattr(c05_durable, "sync_files", sync_files)
    store.upload_files(items)
    assert synced == [5]
    assert all(store.read_file(name) == path.read_bytes() for name, path in items)
    assert not [p for p in (tmp_path / "s" / "text").iterdir() if p.name.startswith(".tmp-")]


def test_one_syncfs_per_filesystem_else_an_fsync_per_file(tmp_path, monkeypatch):
    from notebook_builder.cells import c05_durable
    paths = [path for _, path in _locals(tmp_path, 4)]
    calls, fsyncs = [], []
    monkeypatch.setattr(c05_durable, "SYNCFS", object())     # "Linux has syncfs"
    monkeypatch.setattr(c05_durable, "_syncfs", calls.append)
    monkeypatch.setattr(c05_durable, "filesystem_type", lambda path: "ext4")
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    c05_durable.sync_files(paths)
    assert len(calls) == 1 and fsyncs == []

    def unsupported(path):
        raise NotImplementedError(path)
    monkeypatch.setattr(c05_durable, "_syncfs", unsupported)
    c05_durable.sync_files(paths)
    assert len(fsyncs) == 4


def test_a_group_that_fails_renames_nothing_and_the_mirror_puts_each_on_its_own(tmp_path):
    from notebook_builder.cells.c34_mirror import StoreMirror

    class RefusesOne(LocalStore):
        def upload_file(self, name, local_path):
            if name.startswith("text/" + "0" * 63 + "2"):
                raise StoreError(f"HTTP 503 uploading {name}")
            super().upload_file(name, local_path)

    store = RefusesOne(tmp_path / "s")
    items = _locals(tmp_path, 4)
    with pytest.raises(StoreError):
        store.upload_files(items)
    assert not any(store.exists(name) for name, _ in items)
    assert not list((tmp_path / "s" / "text").iterdir())        # no temp left behind

    mirror = StoreMirror(store)
    held = mirror.put_many(items)
    assert held == {name: name != items[2][0] for name, _ in items}
    assert mirror.uploads == 3 and mirror.lagging.startswith("store error")


@pytest.mark.skipif(not os.sys.platform.startswith("linux"), reason="syncfs(2) is Linux's")
def test_syncfs_is_found_on_linux_and_syncs_real_files(tmp_path):
    from notebook_builder.cells import c05_durable
    assert c05_durable.SYNCFS is not None
    c05_durable.sync_files([path for _, path in _locals(tmp_path, 3)])   # raises on a failed flush


def test_stale_temps_of_killed_writes_are_removed_and_nothing_else(tmp_path):
    store = LocalStore(tmp_path / "s")
    store.write_bytes("pdf_by_hash/ab.pdf", b"%PDF-1")
    store.write_bytes("status.json", b"{}")
    old = [tmp_path / "s" / "pdf_by_hash" / ".tmp-killed1", tmp_path / "s" / ".tmp-killed2"]
    fresh = tmp_path / "s" / "text" / ".tmp-in-progress"
    fresh.parent.mkdir()
    for path in old + [fresh]:
        path.write_bytes(b"partial")
    for path in old:
        os.utime(path, (1_000_000_000, 1_000_000_000))
    assert store.remove_stale_temps(3600) == 2
    assert not any(path.exists() for path in old) and fresh.exists()
    assert store.read_file("pdf_by_hash/ab.pdf") == b"%PDF-1" and store.exists("status.json")


def test_syncfs_is_not_trusted_on_fuse_a_mounted_drive_gets_an_fsync_per_file(tmp_path, monkeypatch):
    from notebook_builder.cells import c05_durable
    paths = [path for _, path in _locals(tmp_path, 6)]
    calls, fsyncs = [], []
    monkeypatch.setattr(c05_durable, "SYNCFS", object())
    monkeypatch.setattr(c05_durable, "_syncfs", calls.append)
    monkeypatch.setattr(c05_durable, "filesystem_type", lambda path: "fuse.rclone")
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    c05_durable.sync_files(paths)
    assert calls == [] and len(fsyncs) == 6


def test_the_filesystem_type_is_read_from_the_mount_table(tmp_path):
    from notebook_builder.cells import c05_durable
    if not os.path.exists("/proc/self/mountinfo"):
        pytest.skip("no /proc/self/mountinfo")
    assert c05_durable.filesystem_type("/proc") == "proc"
    assert c05_durable.filesystem_type(tmp_path) not in ("", "proc")


def test_a_new_folder_is_made_durable_in_its_parent_before_a_name_in_it_is(tmp_path, monkeypatch):
    from notebook_builder.cells import c05_durable
    store = LocalStore(tmp_path / "s")
    synced, real = [], c05_durable.sync_folders

    def record(folders):
        folders = list(folders)
        synced.extend(folders)
        real(folders)
    monkeypatch.setattr(c05_durable, "sync_folders", record)
    store.write_bytes("text/deeper/ab.txt", b"x")
    assert {str(tmp_path / "s"), str(tmp_path / "s" / "text")} <= set(synced)
    assert store.read_file("text/deeper/ab.txt") == b"x"

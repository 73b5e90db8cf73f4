"""c05_durable: the one durable write and its group form."""
from __future__ import annotations

import errno
import os

import pytest

from notebook_builder.cells import c05_durable
from notebook_builder.cells.c00_config import DiskFullError
from notebook_builder.cells.c05_durable import atomic_write, durable_rename, durable_write


def test_durable_write_syncs_the_file_then_renames_then_syncs_the_folder(tmp_path, monkeypatch):
    steps = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: steps.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: steps.append("rename") or real_replace(a, b))
    monkeypatch.setattr(c05_durable, "sync_folders", lambda folders: steps.append(("folders", sorted(folders))))
    target = tmp_path / "status.json"
    durable_write(target, lambda handle: handle.write(b"{}"))
    assert steps == ["fsync", "rename", ("folders", [str(tmp_path)])]
    assert target.read_bytes() == b"{}" and os.listdir(tmp_path) == ["status.json"]


def test_a_full_disk_keeps_the_old_bytes_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "status.json"
    target.write_bytes(b"old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFullError, match="workspace disk is full"):
        durable_write(target, b"new")
    with pytest.raises(DiskFullError):
        atomic_write(target, lambda handle: full(0))
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["status.json"]


def test_a_group_that_fails_midway_keeps_what_is_renamed_and_removes_the_rest(tmp_path, monkeypatch):
    pairs = []
    for number in range(4):
        temp = tmp_path / f".{number}.tmp"
        temp.write_bytes(bytes([number]))
        pairs.append((temp, tmp_path / f"{number}.pdf"))
    synced_folders, real_replace = [], os.replace

    def replace(source, target):
        if str(target).endswith("2.pdf"):
            raise OSError(errno.EIO, "Input/output error")
        real_replace(source, target)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(c05_durable, "sync_folders", lambda folders: synced_folders.append(set(folders)))
    with pytest.raises(OSError) as caught:
        durable_rename(pairs)
    assert caught.value.errno == errno.EIO and caught.value.filename == str(tmp_path / "2.pdf")
    assert sorted(os.listdir(tmp_path)) == ["0.pdf", "1.pdf"]          # no temp left, none promoted after
    assert synced_folders == [{str(tmp_path)}]                          # the renamed names stay durable

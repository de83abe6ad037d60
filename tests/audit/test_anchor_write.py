"""The anchor rewritten in place (kernel/audit/anchor.py ``write_anchor``, issue 37): one
fixed-size record of Kernel's own, synced where it lies; anything else at its path (none
yet, another size, a link, another owner's or a wider-open file) is made anew
atomically, never written through."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernel.audit.anchor import RECORD, Anchor, anchor_mac, load_anchor, write_anchor

KEY = b"k" * 32
HASH = "ab" * 32


def test_the_first_write_makes_the_record_and_later_ones_rewrite_it_in_place(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.anchor"
    write_anchor(path, 1, HASH, KEY)
    made = os.stat(path)
    assert made.st_size == RECORD and made.st_mode & 0o777 == 0o600
    write_anchor(path, 2, "cd" * 32, KEY)
    assert os.stat(path).st_ino == made.st_ino  # the same file: rewritten, not replaced
    assert load_anchor(path) == Anchor(2, "cd" * 32, anchor_mac(KEY, 2, "cd" * 32))
    assert path.read_bytes().endswith(b"\n") and len(path.read_bytes()) == RECORD
    write_anchor(path, 3, HASH)  # an unkeyed record's anchor: shorter, padded the same
    assert load_anchor(path) == Anchor(3, HASH, None)
    assert os.stat(path).st_ino == made.st_ino


def test_an_anchor_of_another_size_is_made_anew(tmp_path: Path) -> None:
    """An anchor an earlier Kernel wrote (unpadded), or one put there by hand."""
    path = tmp_path / "audit.anchor"
    path.write_text(json.dumps({"seq": 1, "hash": HASH}) + "\n")
    path.chmod(0o600)
    old = os.stat(path).st_ino
    write_anchor(path, 2, HASH, KEY)
    assert load_anchor(path) == Anchor(2, HASH, anchor_mac(KEY, 2, HASH))
    assert os.stat(path).st_size == RECORD and os.stat(path).st_ino != old


def test_a_symbolic_link_is_replaced_never_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b" " * RECORD)
    elsewhere.chmod(0o600)
    path = tmp_path / "audit.anchor"
    path.symlink_to(elsewhere)
    write_anchor(path, 5, HASH, KEY)
    assert elsewhere.read_bytes() == b" " * RECORD
    assert not path.is_symlink() and load_anchor(path) == Anchor(5, HASH, anchor_mac(KEY, 5, HASH))


def test_a_hard_link_is_replaced_never_written_through(tmp_path: Path) -> None:
    path = tmp_path / "audit.anchor"
    write_anchor(path, 1, HASH, KEY)
    twin = tmp_path / "twin"
    os.link(path, twin)
    before = twin.read_bytes()
    write_anchor(path, 2, HASH, KEY)
    assert twin.read_bytes() == before  # the other name still holds the old record
    assert load_anchor(path) == Anchor(2, HASH, anchor_mac(KEY, 2, HASH))
    assert os.stat(path).st_nlink == 1


@pytest.mark.parametrize("mode", [0o644, 0o660, 0o400])
def test_a_file_with_other_permissions_is_made_anew_private(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "audit.anchor"
    write_anchor(path, 1, HASH, KEY)
    path.chmod(mode)
    write_anchor(path, 2, HASH, KEY)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert load_anchor(path) == Anchor(2, HASH, anchor_mac(KEY, 2, HASH))

"""The scratch folder's measure and removal (confined/scratch.py), on trees a snippet could leave: deep past
Python's recursion limit and PATH_MAX, folders made unreadable, links to the user's files."""

from __future__ import annotations

import os

import pytest

from vjp_explorer.confined import scratch


def _deep(root, levels: int, name: str = "d" * 100) -> None:
    """`levels` nested folders, a small file in each: 1,500 of them is a path of about 150 KB."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        with open(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd), "w") as f:
            f.write("x")
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.close(fd)


def test_the_size_counts_blocks_and_entries_but_follows_no_link(tmp_path):
    root = tmp_path / "scratch"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "one").write_bytes(os.urandom(1 << 20))
    big = tmp_path / "outside"
    big.write_bytes(os.urandom(4 << 20))
    (root / "link").symlink_to(big)
    (root / "link-to-folder").symlink_to(tmp_path)
    for k in range(100):
        (root / f"empty{k}").touch()
    size = scratch.size(str(root), stop_at=1 << 40)
    # 1 MiB of data, and 4 KiB at least for each of the 104 entries (a folder, two links, 101 files)
    assert (1 << 20) + 103 * 4096 <= size < (1 << 20) + 110 * 4096 + (1 << 16)
    assert scratch.size(str(root), stop_at=1000) > 1000  # stops counting once past the bound


def test_folders_deeper_than_the_measure_goes_are_unmeasurable(tmp_path):
    _deep(tmp_path, scratch.MAX_DEPTH + 5, name="d")
    with pytest.raises(scratch.Unmeasurable, match="nested more than"):
        scratch.size(str(tmp_path), stop_at=1 << 40)


def test_a_folder_the_tool_cannot_read_is_unmeasurable(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads a folder whatever its mode")
    (tmp_path / "hidden").mkdir(mode=0o300)
    with pytest.raises(scratch.Unmeasurable, match="cannot read"):
        scratch.size(str(tmp_path), stop_at=1 << 40)


def test_removal_of_a_tree_past_the_recursion_limit_with_locked_folders_and_links(tmp_path):
    root = tmp_path / "scratch"
    root.mkdir()
    target = tmp_path / "users-file"
    target.write_text("kept")
    _deep(root, 1500)  # past Python's recursion limit and PATH_MAX; the hostile tests make 3,000 in a snippet
    (root / "locked").mkdir(mode=0)
    (root / "write-only").mkdir(mode=0o300)
    (root / "link").symlink_to(target)
    (root / "folder-link").symlink_to(tmp_path)
    scratch.remove(str(root))
    assert not root.exists()
    assert target.read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["users-file"]


def test_removal_of_what_is_gone_is_quiet(tmp_path):
    scratch.remove(str(tmp_path / "never-made"))

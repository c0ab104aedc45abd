"""The scratch folder: measured while the snippet runs and removed after it, however deep it made it.

Neither walk recurses (a snippet can nest folders thousands deep, past Python's recursion limit and past
PATH_MAX) and neither follows a link. While the child lives, the measure opens one name at a time relative
to its parent folder's descriptor, so a folder swapped for a link under it is not followed; it holds one
descriptor per level, so it refuses to go deeper than `MAX_DEPTH`. Once the child is dead nothing changes
under the removal, which keeps one descriptor and climbs back with "..".
"""

from __future__ import annotations

import errno
import os
import stat

MAX_DEPTH = 256  # folder levels the measure follows while the snippet runs (one descriptor each)
ENTRY_BYTES = 4096  # what an entry costs at least (an inode, a block): a million empty files are not free
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Unmeasurable(Exception):
    """The scratch folder cannot be measured: folders nested past MAX_DEPTH, or one the tool cannot read."""


def size(root: str, stop_at: int) -> int:
    """Bytes the scratch folder holds (blocks on disk, at least ENTRY_BYTES an entry), counted until
    `stop_at` is passed. Raises Unmeasurable."""
    total = 0
    fds = [os.open(root, _DIR)]
    pending: list[list[str]] = [[]]
    try:
        total += _list(fds[-1], pending[-1])
        while pending:
            if total > stop_at:
                return total
            if not pending[-1]:
                pending.pop()
                os.close(fds.pop())
                continue
            name = pending[-1].pop()
            if len(fds) > MAX_DEPTH:
                raise Unmeasurable(f"folders nested more than {MAX_DEPTH} deep")
            try:
                fd = os.open(name, _DIR, dir_fd=fds[-1])
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed, or replaced by a file, since it was listed
            except OSError as e:
                if e.errno == errno.ELOOP:
                    continue  # swapped for a link since it was listed: never followed
                # a folder made unreadable (mkdir(name, 0o300)): what it holds cannot be counted
                raise Unmeasurable(f"a folder the tool cannot read ({e.strerror})") from None
            fds.append(fd)
            pending.append([])
            total += _list(fd, pending[-1])
        return total
    finally:
        for fd in fds:
            os.close(fd)


def _list(fd: int, folders: list[str]) -> int:
    """The bytes of a folder's entries; its sub-folders' names go to `folders`."""
    total = 0
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            total += max(st.st_blocks * 512, ENTRY_BYTES)
            if stat.S_ISDIR(st.st_mode):
                folders.append(entry.name)
    return total


def remove(root: str) -> None:
    """Delete the scratch folder and all in it, links removed and never followed, folders made unreadable
    opened up first. Only once the child is dead: it climbs back with "..", which a live snippet could
    move. Leaves what it cannot delete (it never raises)."""
    try:
        fd = os.open(root, _DIR)
    except OSError:
        return
    try:
        stack: list[tuple[str | None, list[str]]] = [(None, _clear(fd))]  # (folder's name, sub-folders left)
        while stack:
            name, pending = stack[-1]
            if pending:
                child = pending.pop()
                try:
                    os.chmod(child, stat.S_IRWXU, dir_fd=fd)  # made with mode 0, say (the child is dead)
                    sub = os.open(child, _DIR, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = sub
                stack.append((child, _clear(fd)))
                continue
            stack.pop()
            if name is None:
                break
            up = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd = up
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                pass
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.rmdir(root)
    except OSError:
        pass


def _clear(fd: int) -> list[str]:
    """Unlink every entry of the folder but its sub-folders, whose names it returns."""
    with os.scandir(fd) as entries:
        listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    folders = []
    for name, is_dir in listed:
        if is_dir:
            folders.append(name)
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except OSError:
            pass
    return folders

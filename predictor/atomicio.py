"""The one way this project writes a file: all or nothing, and on disk once the call returns.

Why: a crash, a kill or a full disk in the middle of a write must never leave a half report, a truncated
loop state, a plan file a reviewer could take for a whole one, or a model file that no longer parses.
Every file the project writes as a whole goes through here, so every output gets the same recipe (the
append-only audit log keeps its own ``O_APPEND`` + ``fsync`` recipe and borrows ``fsync_directory``):

1. a temp file ``.<name>.<random>.tmp`` in the target's own directory (a rename is atomic only within one
   filesystem, and the leading dot keeps globs such as ``*.csv`` from picking it up);
2. the caller writes it (``atomic_open`` for streams, ``atomic_path`` for libraries that want a path:
   pandas, pyarrow, matplotlib, promtool; ``write_text``/``write_bytes`` for a whole value);
3. flush and ``fsync`` the file, so the data is on disk before any name points at it;
4. ``os.replace`` (``Path.replace``) onto the target, which readers see either wholly old or wholly new;
5. ``fsync`` the directory, so the rename itself survives a power cut;
6. on any failure before the rename the temp file is removed and the target is left untouched.

Permissions: a new file gets what a plain ``open()`` would give it (``0o666`` less the umask); rewriting an
existing file keeps its permission bits, as rewriting it in place would. ``permissions=`` forces a mode.
The temp path ends in ``.tmp``: tell libraries that guess a format from the suffix what to write
(matplotlib ``savefig(format=...)``, pandas ``compression=...``).

The parent directory is created when missing (every writer did so before this module). A target that is a
directory, or a parent that is a file, is an ``InputError`` naming the path; other ``OSError`` (permission,
disk full) propagate unchanged. ``fsync=`` is injectable so tests can see that the directory is synced.

A base layer: it imports nothing from the project but ``predictor.errors``.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, overload

from predictor.errors import InputError

__all__ = [
    "Fsync",
    "Signature",
    "atomic_open",
    "atomic_path",
    "check_output_directory",
    "child_path",
    "child_paths",
    "fsync_directory",
    "write_bytes",
    "write_text",
    "write_texts",
]

Fsync = Callable[[int], None]
"""What syncs a file descriptor: ``os.fsync`` in production, a counting wrapper in tests."""

# Filesystems that cannot sync a directory say so with these; the data itself is already synced.
_NO_DIRECTORY_SYNC = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})
# Keep the temp name under the usual 255-byte name limit: prefix dot + random part + ".tmp".
_NAME_ROOM = 200


def child_path(directory: Path, name: str) -> Path:
    """``directory / name``, refused (``InputError``) unless it stays inside ``directory``.

    The one check for output names that come from data (a queue name, a series id): ``../x``, an absolute
    name, a separator or a symlink leading out must never place a file outside the output directory.
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise InputError(f"{name!r} cannot be a file name inside {directory}")
    path = Path(directory) / name
    base = Path(directory).resolve()
    resolved = path.resolve()  # once: each resolve walks every component (2,000 plan files per fleet cycle)
    if not resolved.is_relative_to(base) or resolved.parent != base:
        raise InputError(f"{name!r} would be written outside {directory}")
    return path


def child_paths(directory: Path, names: Iterable[str]) -> list[Path]:
    """``child_path`` for many names of one directory, which is resolved once (not once per name).

    Why: a fleet cycle places 2,000 plan files; ``resolve`` walks every component of every path. A name
    that is not a symbolic link (one ``lstat``) is ``directory / name`` with ``directory`` as its parent,
    which is what ``child_path`` checks; a link is resolved and checked the same way.
    """
    base = Path(directory).resolve()
    out = []
    for name in names:
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise InputError(f"{name!r} cannot be a file name inside {directory}")
        path = Path(directory) / name
        if path.is_symlink():
            resolved = path.resolve()
            if not resolved.is_relative_to(base) or resolved.parent != base:
                raise InputError(f"{name!r} would be written outside {directory}")
        out.append(path)
    return out


def check_output_directory(path: Path, *, what: str = "--out") -> Path:
    """``path`` if it can be an output directory (absent or a directory), else an ``InputError``.

    Commands call it before their work starts, so a file given as ``--out`` fails at once with one line
    instead of after a long run with ``FileExistsError`` from ``mkdir``.
    """
    if path.exists() and not path.is_dir():
        raise InputError(f"{what} {path}: not a directory")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{what} {path}: {parent} is not a directory")
            break
    return path


def _prepare(path: Path, ready: set[Path] | None = None) -> None:
    """Refuse a directory target and create a missing parent, with errors that name the path.

    ``ready``: parents already made by this caller (a batch of files in one directory makes it once).
    """
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")
    if ready is not None and path.parent in ready:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise InputError(f"cannot write {path}: {path.parent} is not a directory") from exc
    except OSError as exc:  # permission denied, read-only filesystem, /proc: the user's output location
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    if ready is not None:
        ready.add(path.parent)


def _new_temp(path: Path, permissions: int | None) -> Path:
    """Create an empty temp file next to ``path`` with the permission bits the target will have."""
    for _ in range(100):  # a clash of 32 random bits is already unlikely; 100 in a row means something else
        tmp = path.parent / f".{path.name[:_NAME_ROOM]}.{secrets.token_hex(4)}.tmp"
        try:
            # 0o666 lets the kernel apply the umask, as a plain open() would (mkstemp would force 0o600).
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:  # an output directory we may not write to: name it, no traceback
            raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc
        try:
            if permissions is None:
                with suppress(FileNotFoundError):  # a new file: the umask already applied
                    permissions = stat.S_IMODE(path.stat().st_mode)
            if permissions is not None:
                os.fchmod(fd, permissions)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temp file name", str(path.parent))


def _fsync_file(path: Path, fsync: Fsync) -> None:
    # A read-only descriptor is enough: fsync flushes the inode, whoever wrote it.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path, fsync: Fsync = os.fsync) -> None:
    """Make entries created, renamed or removed in ``directory`` durable (a no-op where unsupported)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fsync(fd)
    except OSError as exc:
        if exc.errno not in _NO_DIRECTORY_SYNC:
            raise
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: Path, *, permissions: int | None = None, fsync: Fsync = os.fsync) -> Iterator[Path]:
    """A temp path next to ``path``; write it inside the block, and it replaces ``path`` when the block ends.

    If the block raises, the temp file is removed and ``path`` keeps its old content (or stays absent).
    """
    path = Path(path)
    _prepare(path)
    tmp = _new_temp(path, permissions)
    try:
        yield tmp
        _fsync_file(tmp, fsync)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent, fsync)


@overload
def atomic_open(
    path: Path,
    mode: Literal["w", "wt"] = "w",
    *,
    encoding: str = "utf-8",
    newline: str | None = None,
    buffering: int = -1,
    permissions: int | None = None,
    fsync: Fsync = os.fsync,
) -> AbstractContextManager[TextIO]: ...


@overload
def atomic_open(
    path: Path,
    mode: Literal["wb"],
    *,
    encoding: None = None,
    newline: None = None,
    buffering: int = -1,
    permissions: int | None = None,
    fsync: Fsync = os.fsync,
) -> AbstractContextManager[BinaryIO]: ...


def atomic_open(
    path: Path,
    mode: str = "w",
    *,
    encoding: str | None = None,
    newline: str | None = None,
    buffering: int = -1,
    permissions: int | None = None,
    fsync: Fsync = os.fsync,
) -> AbstractContextManager[IO[Any]]:
    """``open(path, mode)`` for writing a new version of ``path`` as a whole; use it with ``with``.

    Text mode (``"w"``) defaults to UTF-8. Only whole-file writes exist here: appending cannot be atomic.
    """
    if mode not in ("w", "wt", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode must be 'w' or 'wb', not {mode!r}")
    if "b" not in mode and encoding is None:
        encoding = "utf-8"
    return _atomic_open(path, mode, encoding, newline, buffering, permissions, fsync)


@contextmanager
def _atomic_open(
    path: Path,
    mode: str,
    encoding: str | None,
    newline: str | None,
    buffering: int,
    permissions: int | None,
    fsync: Fsync,
) -> Iterator[IO[Any]]:
    # The handle closes (flushing Python's buffer) before atomic_path fsyncs and renames.
    with (
        atomic_path(path, permissions=permissions, fsync=fsync) as tmp,
        tmp.open(mode, buffering=buffering, encoding=encoding, newline=newline) as handle,
    ):
        yield handle


def write_bytes(path: Path, data: bytes, *, permissions: int | None = None, fsync: Fsync = os.fsync) -> Path:
    """Replace ``path`` with ``data`` atomically; returns ``path``."""
    with atomic_open(path, "wb", permissions=permissions, fsync=fsync) as handle:
        handle.write(data)
    return Path(path)


def write_text(
    path: Path, text: str, *, encoding: str = "utf-8", permissions: int | None = None, fsync: Fsync = os.fsync
) -> Path:
    """Replace ``path`` with ``text`` atomically, byte for byte (no newline translation); returns ``path``."""
    return write_bytes(path, text.encode(encoding), permissions=permissions, fsync=fsync)


def _sync_files(paths: list[Path], fsync: Fsync, workers: int = 8) -> None:
    """``fsync`` every file, ``workers`` at a time (each opened only while it is synced)."""

    def sync(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fsync(fd)
        finally:
            os.close(fd)

    if len(paths) < 2:
        for path in paths:
            sync(path)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(workers, len(paths)), thread_name_prefix="fsync") as pool:
        for _ in pool.map(sync, paths):  # re-raises the first failure
            pass


Signature = tuple[int, int, int, int]
"""What ``write_texts`` remembers of a file it wrote or read: inode, size, mtime and ctime (ns)."""


def _signature(path: Path) -> Signature | None:
    """A regular file's ``Signature`` (not following a link), ``None`` for anything else or nothing."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) if stat.S_ISREG(st.st_mode) else None


def write_texts(
    files: Mapping[Path, str],
    *,
    encoding: str = "utf-8",
    fsync: Fsync = os.fsync,
    memo: MutableMapping[Path, tuple[Signature, bytes]] | None = None,
) -> list[Path]:
    """Write many small files atomically each, skipping those whose bytes are already on disk.

    Why: a plan directory holds one file per queue and is rewritten every cycle; one ``write_text`` per
    file costs two fsyncs each (file and directory), seconds at a thousand queues, although most files
    did not change. Here each changed file still goes temp → fsync → rename (each is wholly old or wholly
    new), unchanged files are left alone, and each directory is synced once after all its renames.
    The temp files are synced by a few threads at once: the kernel commits concurrent fsyncs of one
    filesystem together (ext4 here: 400 files 2.3 s one by one, 0.16 s with 8 threads), which is what a
    fleet's cycle of 5 x 400 queues needs. Every file is still synced before any rename.
    ``memo``: kept by a caller that writes the same files again (the loop, every cycle): path → the file's
    signature (inode, size, mtime, ctime) and bytes when this function last wrote or read it. A file whose
    signature is unchanged still holds those bytes (any write, rename or replacement changes the ctime), so
    it is compared without being read: one ``lstat`` per unchanged file instead of an open and a read.
    (An in-place rewrite to the same size within one tick of the filesystem's clock after ours would
    go unseen until the file's next change; the plan directory is this project's own output.)
    Returns the paths actually written.
    """
    pending: list[tuple[Path, Path]] = []
    ready: set[Path] = set()
    contents: dict[Path, bytes] = {}
    try:
        for path, text in files.items():
            path = path if isinstance(path, Path) else Path(path)
            data = contents[path] = text.encode(encoding)
            if memo is not None:
                known = memo.get(path)
                if known is not None and known[1] == data and _signature(path) == known[0]:
                    continue
            _prepare(path, ready)
            with suppress(FileNotFoundError, IsADirectoryError):
                if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
                    continue
            tmp = _new_temp(path, None)
            pending.append((tmp, path))
            tmp.write_bytes(data)
        _sync_files([tmp for tmp, _ in pending], fsync)
    except BaseException:
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in pending:
        tmp.replace(path)
    for directory in sorted({path.parent for _, path in pending}):
        fsync_directory(directory, fsync)
    if memo is not None:  # exactly this call's files: what the next call with the same memo compares against
        memo.clear()
        for path, data in contents.items():
            signature = _signature(path)
            if signature is not None:
                memo[path] = (signature, data)
    return [path for _, path in pending]

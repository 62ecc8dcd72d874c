"""What survives a power loss: the probe's model of a file system, replayed from a trace.

Every file and directory under the store's directory is a node. A node keeps what it holds now
and what was made *durable*, plus the operations since (``pending``):

* a file's bytes are durable up to its last ``fsync``/``fdatasync`` (or a write through a
  descriptor opened ``O_SYNC``/``O_DSYNC``); writes and truncations since then are pending;
* a directory's entries — a create, a rename, an unlink, a ``mkdir`` — are durable once the
  directory itself was synced (``fsync`` of a descriptor of the directory); an ``fsync`` of the
  file alone does not make its new name durable;
* ``sync``/``syncfs`` make everything durable.

A power loss keeps the durable state and, of each node's pending operations, a prefix (the
kernel may have written some back; it writes a file's data in order, no garbage — ext4's
``data=ordered`` — and never invents data). :meth:`Replay.snapshot` builds the files one such
choice leaves; the probe chooses several per crash point. Memory-mapped files cannot be seen in
a trace: SQLite's WAL index (``-shm``, rebuilt from the WAL on open) is left out of every
snapshot, and any other file mapped for writing makes the trace unusable (:class:`Unmodelable`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from polyloop.testing._run_store._power_trace import Syscall, TraceError, decode_fd, decode_string

__all__ = ["Replay", "Unmodelable"]

#: A file's pending operation: ("write", offset, bytes) or ("truncate", size).
DataOp = tuple[str, int, bytes]
#: A directory's pending operation: ("set", name, node), ("del", name, -1) or, within one
#: directory, a rename ("move:<old>", new, node).
NameOp = tuple[str, str, int]
#: What a snapshot holds: relative path -> bytes, or ``None`` for a directory.
Snapshot = dict[str, bytes | None]

_WRITES = frozenset({"write", "writev", "pwrite64", "pwritev", "pwritev2"})
_OPENS = frozenset({"open", "openat", "openat2", "creat"})
_UNSUPPORTED = frozenset(
    {"link", "linkat", "symlink", "symlinkat", "fallocate", "copy_file_range", "sendfile"}
    | {"splice", "io_uring_setup"}
)


class Unmodelable(Exception):
    """The writer did something to its files that the probe cannot replay faithfully."""


@dataclass
class Node:
    number: int
    is_dir: bool
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""
    pending: list[DataOp] = field(default_factory=list)
    entries: dict[str, int] = field(default_factory=dict)
    durable_entries: dict[str, int] = field(default_factory=dict)
    pending_names: list[NameOp] = field(default_factory=list)
    mapped: bool = False

    def sync(self) -> None:
        if self.is_dir:
            self.durable_entries = dict(self.entries)
            self.pending_names = []
        else:
            self.durable = bytes(self.data)
            self.pending = []


@dataclass
class _Open:
    node: int
    offset: int
    append: bool
    sync: bool


def _apply_data(data: bytearray, op: DataOp) -> None:
    kind, at, payload = op
    if kind == "truncate":
        del data[at:]
        data.extend(bytes(max(0, at - len(data))))
        return
    if at > len(data):
        data.extend(bytes(at - len(data)))
    data[at : at + len(payload)] = payload


def _apply_name(entries: dict[str, int], op: NameOp) -> None:
    kind, name, node = op
    if kind == "set":
        entries[name] = node
    elif kind == "del":
        entries.pop(name, None)
    else:  # "move:<old>"
        entries.pop(kind.removeprefix("move:"), None)
        entries[name] = node


class Replay:
    """Replays the calls of a trace that touch ``root``; :meth:`feed` says what each changed."""

    def __init__(self, root: str, cwd: str) -> None:
        self.root = os.path.normpath(root)
        self.cwd = cwd
        self.nodes: dict[int, Node] = {0: Node(0, True)}
        self._open: dict[str, _Open] = {}
        self._removed: dict[str, int] = {}

    # ----------------------------------------------------------------- paths and nodes
    def _inside(self, path: str | None) -> bool:
        return path is not None and (path == self.root or path.startswith(self.root + "/"))

    def _lookup(self, path: str) -> int | None:
        if path.endswith(" (deleted)"):
            return self._removed.get(path.removesuffix(" (deleted)"))
        node = 0
        relative = os.path.relpath(path, self.root)
        for part in [] if relative == "." else relative.split("/"):
            found = self.nodes[node].entries.get(part)
            if found is None:
                return None
            node = found
        return node

    def _parent(self, path: str) -> tuple[Node, str]:
        parent = self._lookup(os.path.dirname(path))
        if parent is None or not self.nodes[parent].is_dir:
            raise Unmodelable(f"a change in {path}, whose directory the trace did not see made")
        return self.nodes[parent], os.path.basename(path)

    def _path_arg(self, call: Syscall, dirfd: int | None, index: int) -> str:
        name = decode_string(call.args[index]).decode("utf-8", "surrogateescape")
        base = self.cwd if dirfd is None else (call.fd_path(dirfd)[1] or self.cwd)
        return os.path.normpath(os.path.join(base, name))

    def _node_of_fd(self, call: Syscall) -> tuple[str, Node] | None:
        fd, path = call.fd_path(0)
        if not self._inside(path.removesuffix(" (deleted)") if path else None):
            return None
        assert path is not None
        number = self._lookup(path)
        if number is None:
            raise Unmodelable(f"{call.name} on {path}, a file the trace did not see opened")
        return fd, self.nodes[number]

    def relative(self, node: int) -> str:
        """A current path of ``node`` relative to the root, long names cut (for messages)."""
        if node == 0:
            return ""
        for number, candidate in self.nodes.items():
            for name, child in candidate.entries.items():
                if child == node:
                    above = self.relative(number) if number else ""
                    return f"{above}/{_cut(name)}" if above else _cut(name)
        return f"a removed file (node {node})"

    # ----------------------------------------------------------------- the calls
    def feed(self, call: Syscall) -> str | None:
        """Apply one completed call; a description of the change it made, or ``None``."""
        if call.result is None:
            return None
        if call.name in _OPENS:
            return self._open_call(call)
        if call.name in _WRITES:
            return self._write(call)
        handler = _HANDLERS.get(call.name)
        if handler is not None:
            return handler(self, call)
        if call.name in _UNSUPPORTED and any(self._inside(_arg_path(a)) for a in call.args):
            raise Unmodelable(f"the writer called {call.name}, which the probe cannot replay")
        return None

    def _open_call(self, call: Syscall) -> str | None:
        fd, path = str(call.result), call.result_path
        if not self._inside(path):
            self._open.pop(fd, None)
            return None
        assert path is not None
        flags = "O_CREAT|O_WRONLY|O_TRUNC" if call.name == "creat" else " ".join(call.args[1:3])
        number, change = self._lookup(path), None
        if number is None:
            parent, name = self._parent(path)
            number = len(self.nodes)
            self.nodes[number] = Node(number, "O_DIRECTORY" in flags)
            parent.entries[name] = number
            parent.pending_names.append(("set", name, number))
            change = f"create {self.relative(number)}"
        node = self.nodes[number]
        if "O_TRUNC" in flags and not node.is_dir and node.data:
            self._data(node, ("truncate", 0, b""))
            change = f"truncate {self.relative(number)} to 0 bytes on open"
        synced = "O_SYNC" in flags or "O_DSYNC" in flags
        self._open[fd] = _Open(number, 0, "O_APPEND" in flags, synced)
        return change

    def _data(self, node: Node, op: DataOp, synced: bool = False) -> None:
        _apply_data(node.data, op)
        node.pending.append(op)
        if synced:
            node.sync()

    def target(self, call: Syscall) -> tuple[Node, int, bytes] | None:
        """Where a write-family call writes: (node, offset, bytes), or ``None`` if elsewhere."""
        found = self._node_of_fd(call)
        if found is None:
            return None
        fd, node = found
        described = self._open.get(fd)
        if described is None or described.node != node.number:
            raise Unmodelable(f"{call.name} through a descriptor the trace did not see opened")
        data = bytes(call.data)
        if len(data) != call.result:
            raise TraceError(f"{call.name} wrote {call.result} bytes, the dump holds {len(data)}")
        if described.append:
            offset = len(node.data)
        elif call.name.startswith("p"):
            offset = int(call.args[3], 0)
        else:
            offset = described.offset
        return node, offset, data

    def _write(self, call: Syscall) -> str | None:
        found = self.target(call)
        if found is None:
            return None
        node, offset, data = found
        described = self._open[call.fd_path(0)[0]]
        if not call.name.startswith("p"):
            described.offset = offset + len(data)
        self._data(node, ("write", offset, data), described.sync)
        return (
            f"{call.name} of {len(data)} bytes at offset {offset} of {self.relative(node.number)}"
        )

    def _moved(self, call: Syscall) -> str | None:
        if call.name == "rename":
            source, target = self._path_arg(call, None, 0), self._path_arg(call, None, 1)
        else:
            source, target = self._path_arg(call, 0, 1), self._path_arg(call, 2, 3)
            if call.name == "renameat2" and "RENAME_EXCHANGE" in call.args[-1]:
                raise Unmodelable("the writer exchanged two files (renameat2 RENAME_EXCHANGE)")
        inside = self._inside(source), self._inside(target)
        if not any(inside):
            return None
        if not all(inside):
            raise Unmodelable(f"a rename across the store's directory: {source} -> {target}")
        number = self._lookup(source)
        if number is None:
            raise Unmodelable(f"a rename of {source}, which the trace did not see made")
        replaced = self._lookup(target)
        if replaced is not None:
            self._removed[target] = replaced
        (old_dir, old), (new_dir, new) = self._parent(source), self._parent(target)
        old_dir.entries.pop(old)
        new_dir.entries[new] = number
        if old_dir is new_dir:
            new_dir.pending_names.append((f"move:{old}", new, number))
        else:
            old_dir.pending_names.append(("del", old, -1))
            new_dir.pending_names.append(("set", new, number))
        return (
            f"rename {os.path.relpath(source, self.root)} to {os.path.relpath(target, self.root)}"
        )

    def _unlinked(self, call: Syscall) -> str | None:
        at = call.name == "unlinkat"
        path = self._path_arg(call, 0 if at else None, 1 if at else 0)
        if not self._inside(path) or path == self.root:
            return None
        number = self._lookup(path)
        if number is None:
            return None
        self._removed[path] = number
        parent, name = self._parent(path)
        del parent.entries[name]
        parent.pending_names.append(("del", name, -1))
        return f"remove {_cut(name)}"

    def _made_dir(self, call: Syscall) -> str | None:
        at = call.name == "mkdirat"
        path = self._path_arg(call, 0 if at else None, 1 if at else 0)
        if not self._inside(path) or self._lookup(path) is not None:
            return None
        parent, name = self._parent(path)
        number = len(self.nodes)
        self.nodes[number] = Node(number, True)
        parent.entries[name] = number
        parent.pending_names.append(("set", name, number))
        return f"mkdir {_cut(name)}"

    def _synced(self, call: Syscall) -> str | None:
        found = self._node_of_fd(call)
        if found is None:
            return None
        found[1].sync()
        return f"{call.name} of {self.relative(found[1].number) or 'the directory'}"

    def _synced_all(self, call: Syscall) -> str | None:
        if call.name == "syncfs" and not self._inside(call.fd_path(0)[1]):
            return None
        for node in self.nodes.values():
            node.sync()
        return call.name

    def _truncated(self, call: Syscall) -> str | None:
        if call.name == "truncate":
            number = self._lookup(self._path_arg(call, None, 0))
            node = None if number is None else self.nodes[number]
        else:
            found = self._node_of_fd(call)
            node = None if found is None else found[1]
        if node is None:
            return None
        size = int(call.args[1], 0)
        self._data(node, ("truncate", size, b""))
        return f"{call.name} {self.relative(node.number)} to {size} bytes"

    def _moved_offset(self, call: Syscall) -> str | None:
        described = self._open.get(call.fd_path(0)[0])
        if described is not None and call.result is not None:
            if call.name == "lseek":
                described.offset = call.result
            else:  # read, readv
                described.offset += call.result
        return None

    def _mapped(self, call: Syscall) -> str | None:
        if len(call.args) < 5 or "MAP_SHARED" not in call.args[3]:
            return None
        if "PROT_WRITE" not in call.args[2]:
            return None
        path = decode_fd(call.args[4])[1]
        if not self._inside(path):
            return None
        assert path is not None
        if not path.endswith("-shm"):
            raise Unmodelable(
                f"the writer maps {path} for writing (mmap MAP_SHARED): writes to memory do "
                "not show in a system-call trace"
            )
        number = self._lookup(path)
        if number is not None:
            self.nodes[number].mapped = True
        return None

    # ----------------------------------------------------------------- crash states
    def snapshot(
        self,
        keep_data: Callable[[Node], int],
        keep_names: Callable[[Node], int],
        torn: tuple[int, DataOp] | None = None,
    ) -> Snapshot:
        """The files a power loss leaves now: each node's durable state plus the first
        ``keep_data(node)`` / ``keep_names(node)`` of its pending operations (and, with
        ``torn``, part of one more write to that node, after all of its pending ones)."""
        out: Snapshot = {}
        self._tree(0, "", keep_data, keep_names, torn, out)
        return out

    def _tree(
        self,
        number: int,
        prefix: str,
        keep_data: Callable[[Node], int],
        keep_names: Callable[[Node], int],
        torn: tuple[int, DataOp] | None,
        out: Snapshot,
    ) -> None:
        directory = self.nodes[number]
        entries = dict(directory.durable_entries)
        for op in directory.pending_names[: keep_names(directory)]:
            _apply_name(entries, op)
        for name, child_number in sorted(entries.items()):
            child, path = self.nodes[child_number], prefix + name
            if child.is_dir:
                out[path] = None
                self._tree(child_number, path + "/", keep_data, keep_names, torn, out)
            elif not child.mapped:
                out[path] = _content(child, keep_data(child), torn)


def _cut(name: str) -> str:
    """A file name as a message shows it: one over 40 characters loses its middle."""
    return name if len(name) <= 40 else f"{name[:16]}…{name[-16:]}"


def _content(node: Node, keep: int, torn: tuple[int, DataOp] | None) -> bytes:
    tearing = torn is not None and torn[0] == node.number
    if tearing:
        keep = len(node.pending)  # the torn write comes after every pending one of its file
    elif keep >= len(node.pending):
        return bytes(node.data)
    elif keep == 0:
        return node.durable
    data = bytearray(node.durable)
    for op in node.pending[:keep]:
        _apply_data(data, op)
    if torn is not None and tearing:
        _apply_data(data, torn[1])
    return bytes(data)


def _arg_path(text: str) -> str | None:
    path = decode_fd(text)[1]
    if path is None and text.startswith('"'):
        try:
            path = decode_string(text).decode("utf-8", "surrogateescape")
        except TraceError:
            return None
    return path


_HANDLERS: dict[str, Callable[[Replay, Syscall], str | None]] = {
    "rename": Replay._moved,
    "renameat": Replay._moved,
    "renameat2": Replay._moved,
    "unlink": Replay._unlinked,
    "unlinkat": Replay._unlinked,
    "rmdir": Replay._unlinked,
    "mkdir": Replay._made_dir,
    "mkdirat": Replay._made_dir,
    "fsync": Replay._synced,
    "fdatasync": Replay._synced,
    "sync": Replay._synced_all,
    "syncfs": Replay._synced_all,
    "truncate": Replay._truncated,
    "ftruncate": Replay._truncated,
    "lseek": Replay._moved_offset,
    "read": Replay._moved_offset,
    "readv": Replay._moved_offset,
    "mmap": Replay._mapped,
}

"""The power-loss probe's trace reader and its model of what survives, on hand-written traces.

Each trace is what ``strace -f -y -xx -s 64 -e write=all`` prints; the model must keep exactly
what an ``fsync`` of a file (its data) or of its directory (its entries) made durable.
"""

from __future__ import annotations

import pytest

from polyloop.testing._run_store._power_model import Node, Replay, Unmodelable
from polyloop.testing._run_store._power_trace import Syscall, TraceError, parse_trace

ROOT = "/tmp/store"


def hx(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return "".join(f"\\x{byte:02x}" for byte in data)


def fd(number: int, path: str) -> str:
    return f"{number}<{hx(path)}>"


def dump(data: bytes) -> list[str]:
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk[:8])
        if len(chunk) > 8:
            hexes += "  " + " ".join(f"{b:02x}" for b in chunk[8:])
        lines.append(f" | {at:05x}  {hexes:<49} {'.' * len(chunk):<16} |")
    return lines


def opened(number: int, name: str, flags: str = "O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC") -> str:
    path = f"{ROOT}/{name}" if name else ROOT
    return f'1  openat(AT_FDCWD, "{hx(path)}", {flags}, 0644) = {fd(number, path)}'


def wrote(number: int, name: str, data: bytes, call: str = "write") -> list[str]:
    where = fd(number, f"{ROOT}/{name}")
    head = f'1  {call}({where}, "{hx(data[:8])}"..., {len(data)}'
    tail = ", 0" if call == "pwrite64" else ""
    return [f"{head}{tail}) = {len(data)}", *dump(data)]


def synced(number: int, name: str = "", call: str = "fsync") -> str:
    return f"1  {call}({fd(number, f'{ROOT}/{name}' if name else ROOT)}) = 0"


def replay(lines: list[str]) -> Replay:
    model = Replay(ROOT, "/")
    for call in parse_trace(lines):
        model.feed(call)
    return model


def nothing(node: Node) -> int:
    return 0


def everything(node: Node) -> int:
    return max(len(node.pending), len(node.pending_names))


def strict(model: Replay) -> dict[str, bytes | None]:
    return model.snapshot(nothing, nothing)


def whole(model: Replay) -> dict[str, bytes | None]:
    return model.snapshot(everything, everything)


# ------------------------------------------------------------------ the trace reader
def test_a_call_is_read_with_its_descriptor_path_and_its_dumped_bytes() -> None:
    data = bytes(range(40))
    [call] = list(parse_trace(wrote(3, "a", data)))
    assert (call.name, call.result, bytes(call.data)) == ("write", 40, data)
    assert call.fd_path(0) == ("3", f"{ROOT}/a")


def test_an_interrupted_call_is_placed_where_it_returned() -> None:
    lines = [
        f"1  fsync({fd(3, ROOT + '/a')} <unfinished ...>",
        f'2  write({fd(1, "pipe:[9]")}, "{hx("power-ack 0 0")}", 13) = 13',
        *dump(b"power-ack 0 0"),
        "1  <... fsync resumed>) = 0",
    ]
    calls = list(parse_trace(lines))
    assert [c.name for c in calls] == ["write", "fsync"]
    assert calls[1].fd_path(0) == ("3", f"{ROOT}/a")


def test_failed_calls_signals_exits_and_noise_carry_no_result() -> None:
    lines = [
        f'1  openat(AT_FDCWD, "{hx("/nope")}", O_RDONLY) = -1 ENOENT (No such file)',
        "1  --- SIGCHLD {si_signo=SIGCHLD} ---",
        "1  +++ exited with 0 +++",
        "garbage without a pid",
        "1  write(3, unparsable",
    ]
    assert [c.result for c in parse_trace(lines)] == [None]


def test_a_dump_line_without_a_call_is_refused() -> None:
    with pytest.raises(TraceError, match="no call before it"):
        list(parse_trace(dump(b"orphan")))


def test_a_dump_shorter_than_the_write_is_refused_by_the_model() -> None:
    lines = [opened(3, "a"), *wrote(3, "a", b"x" * 40)[:2]]  # the dump's last line is missing
    with pytest.raises(TraceError, match="wrote 40 bytes, the dump holds 16"):
        replay(lines)


# ------------------------------------------------------------------ what survives
def test_unsynced_data_and_names_are_lost_and_a_process_crash_keeps_them() -> None:
    model = replay([opened(3, "a"), *wrote(3, "a", b"hello\n")])
    assert strict(model) == {}
    assert whole(model) == {"a": b"hello\n"}


def test_an_fsynced_file_whose_directory_was_not_synced_is_lost() -> None:
    model = replay([opened(3, "a"), *wrote(3, "a", b"hello\n"), synced(3, "a")])
    assert strict(model) == {}
    model = replay(
        [opened(3, "a"), *wrote(3, "a", b"hello\n"), synced(3, "a"), opened(4, ""), synced(4)]
    )
    assert strict(model) == {"a": b"hello\n"}


def test_a_directory_sync_alone_keeps_the_name_not_the_data() -> None:
    model = replay([opened(3, "a"), *wrote(3, "a", b"hello\n"), opened(4, ""), synced(4)])
    assert strict(model) == {"a": b""}


def test_fdatasync_and_an_o_sync_descriptor_make_data_durable() -> None:
    base = [opened(4, ""), opened(3, "a"), synced(4)]
    model = replay([*base, *wrote(3, "a", b"one\n"), synced(3, "a", "fdatasync")])
    assert strict(model) == {"a": b"one\n"}
    model = replay([*base, opened(5, "a", "O_WRONLY|O_DSYNC"), *wrote(5, "a", b"two\n")])
    assert strict(model) == {"a": b"two\n"}


def test_a_rename_without_a_directory_sync_leaves_the_old_file() -> None:
    lines = [
        opened(4, ""),
        opened(3, "log"),
        *wrote(3, "log", b"old\n"),
        synced(3, "log"),
        synced(4),
        opened(5, "tmp", "O_WRONLY|O_CREAT|O_TRUNC"),
        *wrote(5, "tmp", b"old\nnew\n"),
        synced(5, "tmp"),
        f'1  rename("{hx(ROOT + "/tmp")}", "{hx(ROOT + "/log")}") = 0',
    ]
    assert strict(replay(lines)) == {"log": b"old\n"}
    assert whole(replay(lines)) == {"log": b"old\nnew\n"}
    assert strict(replay([*lines, synced(4)])) == {"log": b"old\nnew\n"}


def test_unlink_and_truncate_are_undone_unless_synced() -> None:
    lines = [
        opened(4, ""),
        opened(3, "a"),
        *wrote(3, "a", b"abcdef"),
        synced(3, "a"),
        synced(4),
        f"1  ftruncate({fd(3, ROOT + '/a')}, 2) = 0",
        f'1  unlinkat(AT_FDCWD, "{hx(ROOT + "/a")}", 0) = 0',
    ]
    assert strict(replay(lines)) == {"a": b"abcdef"}
    assert whole(replay(lines)) == {}


def test_offsets_follow_append_lseek_read_and_pwrite() -> None:
    lines = [
        opened(3, "a", "O_RDWR|O_CREAT"),
        *wrote(3, "a", b"0123456789"),
        f"1  lseek({fd(3, ROOT + '/a')}, 2, SEEK_SET) = 2",
        f'1  read({fd(3, ROOT + "/a")}, "{hx("23")}", 2) = 2',
        *wrote(3, "a", b"XY"),
        *wrote(3, "a", b"P", "pwrite64"),
    ]
    assert whole(replay(lines)) == {"a": b"P123XY6789"}


def test_the_sqlite_wal_index_is_left_out_and_other_shared_maps_are_refused() -> None:
    def mapped(name: str) -> list[str]:
        where = fd(3, f"{ROOT}/{name}")
        return [
            opened(3, name, "O_RDWR|O_CREAT"),
            f"1  mmap(NULL, 32768, PROT_READ|PROT_WRITE, MAP_SHARED, {where}, 0) = 0x7f00",
        ]

    assert whole(replay(mapped("db-shm"))) == {}
    with pytest.raises(Unmodelable, match="mmap MAP_SHARED"):
        replay(mapped("data.bin"))


def test_calls_the_model_cannot_replay_are_refused_not_ignored() -> None:
    link = f'1  link("{hx(ROOT + "/a")}", "{hx(ROOT + "/b")}") = 0'
    with pytest.raises(Unmodelable, match="link"):
        replay([opened(3, "a"), link])
    with pytest.raises(Unmodelable, match="did not see opened"):
        replay(wrote(7, "a", b"x"))
    outside = f'1  rename("{hx("/elsewhere/x")}", "{hx(ROOT + "/a")}") = 0'
    with pytest.raises(Unmodelable, match="across the store's directory"):
        replay([outside])


def test_files_outside_the_store_are_ignored() -> None:
    lines = [
        f'1  openat(AT_FDCWD, "{hx("/tmp/other")}", O_WRONLY|O_CREAT) = {fd(3, "/tmp/other")}',
        f'1  write({fd(3, "/tmp/other")}, "{hx("x")}", 1) = 1',
        *dump(b"x"),
        f'1  write({fd(3, "/tmp/storefront")}, "{hx("x")}", 1) = 1',
        *dump(b"x"),
    ]
    assert whole(replay(lines)) == {}


def test_a_torn_write_keeps_its_first_bytes_after_the_files_pending_ones() -> None:
    model = replay([opened(4, ""), opened(3, "a"), synced(4), *wrote(3, "a", b"ab")])
    [call] = list(parse_trace(wrote(3, "a", b"cdef")))
    target = model.target(call)
    assert target is not None
    node, offset, data = target
    files = model.snapshot(nothing, everything, (node.number, ("write", offset, data[:2])))
    assert files == {"a": b"abcd"}


def test_syscall_without_a_descriptor_path_is_outside() -> None:
    call = Syscall(1, "fsync", ["3"], 0)
    assert Replay(ROOT, "/").feed(call) is None

"""The child side of :class:`~polyloop.executors.PythonExecutor`.

This module's *source* is run as ``python -c <source> <limits-json>`` in the child process; the
parent never executes it. It must stay standard-library only and self-contained (no polyloop
imports: the child may run without polyloop on its path).

Protocol: line-delimited JSON, one request line on stdin, one response line on stdout.

* request ``{"id": int, "code": str, "max_output_chars": int | null}``
* response ``{"id": int, "observation": str, "raised": bool, "truncated_chars": int}``
* the first line the child writes is ``{"ready": true, "pid": int}``, or
  ``{"ready": false, "error": str}`` when it could not apply its limits (it then exits).

``observation`` is everything the code printed to ``sys.stdout``/``sys.stderr``, then either
the formatted traceback when the code raised (any ``BaseException``, including ``SystemExit``
from ``sys.exit()``; ``raised`` is then true) or the ``repr`` of the last statement's value
when that statement is an expression and the value is not ``None`` (as in a REPL). It is capped
to ``max_output_chars`` *while it is written*: characters beyond the cap are only counted
(``truncated_chars``), so the child's memory stays bounded whatever the code prints.

The limits (``argv[1]``, JSON: ``cpu_time_s``, ``memory_bytes``, ``max_processes``,
``max_file_bytes``, ``network``) are applied before the first request is read.

The protocol streams are private descriptors duplicated at start-up; file descriptors 0 and 1
are then pointed at ``/dev/null`` and stderr, so code that calls ``input()``, writes to
``sys.__stdout__`` or to file descriptor 1 cannot corrupt the protocol.
"""

import ast
import collections
import io
import json
import linecache
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

SOURCES_KEPT = 100  # the last this many actions' sources stay in linecache, for tracebacks

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


class CappedOutput(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters written and counts the rest."""

    def __init__(self, limit: int | None) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._room = limit
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        kept = text if self._room is None else text[: self._room]
        self._parts.append(kept)
        if self._room is not None:
            self._room -= len(kept)
        self.dropped += len(text) - len(kept)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._parts)


def _remember_source(filename: str, code: str, recent: collections.deque[str]) -> None:
    """Register ``code`` for tracebacks, letting go of the oldest beyond ``SOURCES_KEPT``."""
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    recent.append(filename)
    while len(recent) > SOURCES_KEPT:
        linecache.cache.pop(recent.popleft(), None)


def _run(code: str, namespace: dict[str, Any], filename: str, out: CappedOutput) -> bool:
    """Run ``code``, writing its output and then its traceback to ``out``; whether it raised."""
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    try:
        tree = ast.parse(code, filename, "exec")
        last: ast.expr | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body[-1].value
            del tree.body[-1]
        exec(compile(tree, filename, "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last), filename, "eval"), namespace)
            if value is not None:
                print(repr(value))
    except BaseException as exc:  # the code's own failure, reported as text
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next  # drop this server's frames: the model sees only its own code
        if isinstance(exc, SyntaxError):
            tb = None
        out.write("".join(traceback.format_exception(type(exc), exc, tb)))
        return True
    finally:
        sys.stdout, sys.stderr = saved
    return False


def _libc_unshare(flags: int) -> int:
    """``unshare(2)`` through ctypes (``os.unshare`` is Python 3.12+): 0 or the errno."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return 0 if libc.unshare(flags) == 0 else ctypes.get_errno()


def _map_to_self(uid: int, gid: int) -> None:
    """In a fresh user namespace, keep our own uid and gid (rather than appear as nobody)."""
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


def isolate_network(unshare: Callable[[int], int] = _libc_unshare) -> str | None:
    """Enter a new network namespace (only a down loopback); why not, or ``None`` on success.

    Root with CAP_SYS_ADMIN may enter one directly; other users need a user namespace too.
    """
    uid, gid = os.getuid(), os.getgid()
    if unshare(CLONE_NEWNET) == 0:
        return None
    error = unshare(CLONE_NEWUSER | CLONE_NEWNET)
    if error != 0:
        return (
            f"network=False needs a new network namespace, which this system refused "
            f"(unshare: {os.strerror(error)}). It works as root with CAP_SYS_ADMIN, or where "
            "unprivileged user namespaces are enabled (sysctl user.max_user_namespaces > 0, "
            "kernel.unprivileged_userns_clone=1, no seccomp filter blocking unshare); "
            "otherwise use network=True."
        )
    _map_to_self(uid, gid)
    return None


def _set_rlimits(limits: dict[str, Any]) -> str | None:
    import resource

    wanted = [
        (
            "cpu_time_s",
            "RLIMIT_CPU",
            1,
        ),  # the hard limit a second later: SIGKILL if SIGXCPU is caught
        ("memory_bytes", "RLIMIT_AS", 0),
        ("max_processes", "RLIMIT_NPROC", 0),
        ("max_file_bytes", "RLIMIT_FSIZE", 0),
    ]
    for option, name, grace in wanted:
        value = limits.get(option)
        if value is None:
            continue
        try:
            resource.setrlimit(getattr(resource, name), (value, value + grace))
        except (ValueError, OSError, AttributeError) as exc:
            return f"{option}={value} could not be applied ({name}: {exc})."
    return None


def confine(limits: dict[str, Any]) -> str | None:
    """Apply the session's limits to this process; why not, or ``None`` when all are in place."""
    if limits.get("network") is False:
        refusal = isolate_network()
        if refusal is not None:
            return refusal
    return _set_rlimits(limits)


def _serve(requests: Any, responses: Any) -> None:
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    recent: collections.deque[str] = collections.deque()
    for line in requests:
        request = json.loads(line)
        ident = request["id"]
        filename = f"<action-{ident}>"
        _remember_source(filename, request["code"], recent)
        limit = request.get("max_output_chars")
        out = CappedOutput(limit if isinstance(limit, int) else None)
        raised = _run(request["code"], namespace, filename, out)
        body = {
            "id": ident,
            "observation": out.getvalue(),
            "raised": raised,
            "truncated_chars": out.dropped,
        }
        responses.write(json.dumps(body, ensure_ascii=True) + "\n")
        responses.flush()


def main() -> None:
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8", errors="surrogateescape")
    responses = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="backslashreplace")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the child
    refusal = confine(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
    hello = (
        {"ready": True, "pid": os.getpid()}
        if refusal is None
        else {"ready": False, "error": refusal}
    )
    responses.write(json.dumps(hello) + "\n")
    responses.flush()
    if refusal is None:
        _serve(requests, responses)


if __name__ == "__main__":
    main()

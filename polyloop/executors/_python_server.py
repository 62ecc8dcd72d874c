"""The child side of :class:`~polyloop.executors.PythonExecutor`.

This module's *source* is run as ``python -c <source>`` in the child process; the parent never
executes it. It must stay standard-library only and self-contained (no polyloop imports: the
child may run without polyloop on its path).

Protocol: line-delimited JSON, one request line on stdin, one response line on stdout.

* request ``{"id": int, "code": str, "max_output_chars": int | null}``
* response ``{"id": int, "observation": str, "raised": bool, "truncated_chars": int}``
* the first line the child writes is ``{"ready": true, "pid": int}``.

``observation`` is everything the code printed to ``sys.stdout``/``sys.stderr``, then either
the formatted traceback when the code raised (any ``BaseException``, including ``SystemExit``
from ``sys.exit()``; ``raised`` is then true) or the ``repr`` of the last statement's value
when that statement is an expression and the value is not ``None`` (as in a REPL). It is cut
to ``max_output_chars`` here, in the child, so a response line stays bounded.

The protocol streams are private descriptors duplicated at start-up; file descriptors 0 and 1
are then pointed at ``/dev/null`` and stderr, so code that calls ``input()``, writes to
``sys.__stdout__`` or to file descriptor 1 cannot corrupt the protocol.
"""

import ast
import io
import json
import linecache
import os
import sys
import traceback
from typing import Any


def _run(code: str, namespace: dict[str, Any], filename: str) -> tuple[str, str | None]:
    buffer = io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = buffer
    error: str | None = None
    try:
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
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
        error = "".join(traceback.format_exception(type(exc), exc, tb))
    finally:
        sys.stdout, sys.stderr = saved
    return buffer.getvalue(), error


def main() -> None:
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8", errors="surrogateescape")
    responses = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="backslashreplace")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the child
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    responses.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    responses.flush()
    for line in requests:
        request = json.loads(line)
        ident = request["id"]
        output, error = _run(request["code"], namespace, f"<action-{ident}>")
        observation = output + (error or "")
        limit = request.get("max_output_chars")
        cut = 0
        if isinstance(limit, int) and len(observation) > limit:
            cut = len(observation) - limit
            observation = observation[:limit]
        body = {
            "id": ident,
            "observation": observation,
            "raised": error is not None,
            "truncated_chars": cut,
        }
        responses.write(json.dumps(body, ensure_ascii=True) + "\n")
        responses.flush()


if __name__ == "__main__":
    main()

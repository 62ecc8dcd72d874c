"""Session-wide fixtures: a throwaway PostgreSQL server for the ``postgres``-marked tests.

``postgres_dsn`` (session scope) starts one server per pytest process — under pytest-xdist each
worker has its own session, so each worker starts its own server in its own ``mkdtemp``
directory on its own free loopback port. ``postgres_database_dsn`` (function scope) gives each
test a fresh, uniquely named database on that server, so tests never see each other's runs.

Why plain ``subprocess`` and not pytest-postgresql: its ``postgresql_proc`` runs ``initdb`` and
``pg_ctl`` as the current user and has no way to run them as another one, and both programs
refuse to run as root — which is what CI runs as. Here they run through
``runuser -u postgres --`` when we are root, directly otherwise.

Skip policy: outside CI, no PostgreSQL binaries → the tests skip, saying how to install them.
In CI (``CI`` set) the Postgres tests must run, so missing binaries are a failure.

Also the ``slow`` mark of the test functions ``tests/slow-tests.txt`` lists (measured; written by
``scripts/slow_tests.py``): the README's everyday command leaves them to CI's slow-test step.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import typing
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from polyloop._base._extras import install_hint, missing_modules
from polyloop.testing._shared._base import in_ci

_INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with "
    "`apt-get install -y postgresql` (Debian/Ubuntu; the binaries land in "
    "/usr/lib/postgresql/<version>/bin), or put a directory holding initdb and pg_ctl on PATH"
)
_SUPERUSER = "postgres"
# Server processes run as this OS user when the tests run as root (initdb/pg_ctl refuse root).
_OS_USER = "postgres"
_START_ATTEMPTS = 5
_WATCHDOG = """
import shutil, subprocess, sys
sys.stdin.buffer.read()  # EOF: the fixture is done, or pytest died
subprocess.run(sys.argv[2:], capture_output=True, timeout=120, check=False)
shutil.rmtree(sys.argv[1], ignore_errors=True)
"""


def _postgres_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or ``None``.

    ``pg_config --bindir`` first (it can belong to libpq-dev without a server, hence the check),
    then the Debian layout (newest version first), then PATH.
    """
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=30
            ).stdout.strip()
            if out:
                candidates.append(Path(out))

    def version(path: str) -> tuple[int, ...]:
        name = Path(path).parent.name
        return tuple(int(p) for p in name.split(".") if p.isdigit())

    candidates += [
        Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    ]
    initdb = shutil.which("initdb")
    if initdb is not None:
        candidates.append(Path(initdb).parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def _as_server_user() -> list[str]:
    """Command prefix that runs a server program as an unprivileged user."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(_OS_USER)
    except KeyError:
        pytest.fail(
            f"running as root, and initdb/pg_ctl refuse root, but there is no {_OS_USER!r} OS "
            "user to run them as (the Debian `postgresql` package creates it; or run pytest as "
            "an unprivileged user)"
        )
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.fail(
            "running as root but `runuser` (util-linux) is missing; it is needed to "
            f"run initdb/pg_ctl as {_OS_USER!r}"
        )
    return [runuser, "-u", _OS_USER, "--"]


def _free_loopback_port() -> int:
    # The port is free now; another process may take it before the server binds it, which the
    # start loop below handles by retrying with a new port.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run(cmd: list[str], what: str, log: Path | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        server_log = ""
        if log is not None and log.exists():
            with contextlib.suppress(OSError):
                server_log = "\nserver log:\n" + log.read_text(errors="replace")[-4000:]
        raise RuntimeError(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"stdout: {proc.stdout}\nstderr: {proc.stderr}{server_log}"
        )


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of a superuser connection to a throwaway PostgreSQL server (database ``postgres``).

    The server listens on 127.0.0.1 only, trusts local connections, runs with ``fsync=off``
    (its durability is not under test; the client-side fence and transactions are), and is
    stopped (``pg_ctl stop -m immediate``) and deleted at the end of the session.
    """
    bindir = _postgres_bindir()
    if bindir is None:
        if in_ci():
            pytest.fail(f"CI is set, so the PostgreSQL tests must run, but: {_INSTALL_HINT}")
        pytest.skip(_INSTALL_HINT)
    prefix = _as_server_user()

    base = Path(tempfile.mkdtemp(prefix="polyloop-pg-"))
    data, log = base / "data", base / "server.log"
    pg_ctl = [*prefix, str(bindir / "pg_ctl"), "-D", str(data)]
    # The watchdog stops the server and deletes the directory when its stdin reaches EOF: when
    # this fixture finishes, and also when pytest is killed (SIGTERM from `timeout`, SIGKILL),
    # so no run can leak a server. Its own session keeps it out of signals sent to our group.
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(base), *pg_ctl, "-m", "immediate", "-w", "stop"],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        base.chmod(0o700)
        if prefix:
            owner = pwd.getpwnam(_OS_USER)
            os.chown(base, owner.pw_uid, owner.pw_gid)
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", _SUPERUSER, "--auth=trust"]
        _run([*prefix, *initdb, "--encoding=UTF8", "--locale=C", "--no-sync"], "initdb")
        port = 0
        for attempt in range(1, _START_ATTEMPTS + 1):
            port = _free_loopback_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {base} "
                "-c fsync=off -c full_page_writes=off -c max_connections=200"
            )
            try:
                _run(
                    [*pg_ctl, "-l", str(log), "-w", "-t", "60", "-o", options, "start"],
                    "pg_ctl start",
                    log,
                )
                break
            except RuntimeError:
                if attempt == _START_ATTEMPTS:
                    raise
        yield f"postgresql://{_SUPERUSER}@127.0.0.1:{port}/postgres"
    finally:
        assert watchdog.stdin is not None
        watchdog.stdin.close()
        watchdog.wait(timeout=180)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgres_database_dsn(postgres_dsn: str) -> Iterator[str]:
    """DSN of a new, empty database (uuid name) on the session's server; dropped afterwards."""
    try:
        import psycopg
    except ImportError:
        hint = "psycopg is not installed: pip install 'polyloop[postgres]'"
        if in_ci():
            pytest.fail(f"CI is set, so the PostgreSQL tests must run, but {hint}")
        pytest.skip(hint)
    name = f"polyloop_test_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_dsn.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --------------------------------------------------------------------------- extras


def require_extra(extra: str) -> None:
    """Skip the test (or, at module level, the module) unless ``polyloop[extra]`` is installed;
    in CI (``CI`` set) every extra must be installed, so a missing one fails instead.

    Asks :func:`polyloop._base._extras.extra_installed`, the project's one probe (safe for dotted
    module names, unlike ``importlib.util.find_spec``).
    """
    missing = missing_modules(extra)
    if not missing:
        return
    hint = f"needs {install_hint(extra)}; missing: {', '.join(missing)}"
    if in_ci():
        pytest.fail(f"CI is set, so this test must run, but it {hint}", pytrace=False)
    pytest.skip(hint, allow_module_level=True)


# --------------------------------------------------------------------------- MCP

MCP_SERVER = Path(__file__).resolve().parent / "integration" / "mcp_server.py"
# A loaded CI machine imports the SDK slowly; the poll ends as soon as the server listens.
_MCP_START_S = 60.0


def require_mcp() -> None:
    """At the top of an MCP test module: skip it without the SDK, except in CI (then fail)."""
    require_extra("mcp")


def mcp_stdio_command(*options: str) -> list[str]:
    """The command that runs the test MCP server over stdio (``options``: ``--broken``)."""
    return [sys.executable, str(MCP_SERVER), *options]


@contextlib.contextmanager
def mcp_http_server(*options: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The test MCP server over streamable HTTP on a free loopback port: its URL and process
    (``options``: ``--broken``, ``--token T``).

    Returns once the port accepts connections; the process is killed on the way out.
    """
    port = _free_loopback_port()
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            [sys.executable, str(MCP_SERVER), "--http", str(port), *options],
            stdout=log,
            stderr=log,
        )
        try:
            _wait_until_listening(port, server, log)
            yield f"http://127.0.0.1:{port}/mcp", server
        finally:
            server.kill()
            server.wait(timeout=30)


def _wait_until_listening(
    port: int, server: subprocess.Popen[bytes], log: typing.IO[bytes]
) -> None:
    deadline = time.monotonic() + _MCP_START_S
    while time.monotonic() < deadline and server.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.05)
    log.seek(0)
    output = log.read().decode(errors="replace")[-4000:]
    raise RuntimeError(f"the MCP test server did not listen on port {port}:\n{output}")


@pytest.fixture(scope="session")
def mcp_http_url() -> Iterator[str]:
    """URL of the test MCP server over HTTP, shared by the session (tests that kill a server
    start their own with ``mcp_http_server()``)."""
    with mcp_http_server() as (url, _):
        yield url


# ------------------------------------------------------------------ the slow-test listing
SLOW_LISTING = Path(__file__).with_name("slow-tests.txt")


def slow_test_functions() -> frozenset[str]:
    """The test functions ``tests/slow-tests.txt`` lists (``file::[Class::]function``)."""
    names = set()
    for line in SLOW_LISTING.read_text(encoding="utf-8").splitlines():
        name = line.split("#", 1)[0].strip()
        if name:
            names.add(name)
    return frozenset(names)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test function the listing names (measured: a case took seconds), so
    the README's everyday command leaves it to CI's slow-test step."""
    listed = slow_test_functions()
    for item in items:
        if item.nodeid.split("[", 1)[0] in listed:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _signals_as_they_were() -> Iterator[None]:
    """Every test leaves SIGINT and SIGTERM and this thread's signal mask as it found them: the
    batch command ignores both signals for the rest of its process once interrupted, and a
    child process started by a later test in the same worker would inherit that."""
    import signal

    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    for number, handler in handlers.items():
        if signal.getsignal(number) is not handler and handler is not None:
            signal.signal(number, handler)
    if signal.pthread_sigmask(signal.SIG_BLOCK, []) != mask:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

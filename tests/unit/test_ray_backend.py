"""RayBackend's arguments, its install hint and its refusals, without a Ray cluster.

The batches themselves run on a real local cluster in tests/integration/test_ray_backend.py.
What is checked before Ray is imported runs without the extra; the rest is marked ``ray``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop._batch import Backend
from polyloop.stores import MemoryStore
from tests.conftest import require_extra
from tests.integration.ray_seams import AGENT


@pytest.mark.parametrize(
    "address",
    ["", " ", "host:6379 ", "ray://h\n:1", "\x00", "auto\ud800", 6379, b"auto"],
)
def test_an_address_that_names_no_cluster_is_refused(address: Any) -> None:
    from polyloop.ray import RayBackend

    with pytest.raises(ValueError, match="RayBackend address must be None or a cluster address"):
        RayBackend(address=address)


@pytest.mark.parametrize("retries", [-1, True, 1.5, "3", None])
def test_max_retries_is_a_count(retries: Any) -> None:
    from polyloop.ray import RayBackend

    with pytest.raises(ValueError, match=r"max_retries must be an int >= 0, got "):
        RayBackend(max_retries=retries)


@pytest.mark.parametrize("options", [[("num_cpus", 1)], "num_cpus=1", 1])
def test_options_are_a_mapping(options: Any) -> None:
    from polyloop.ray import RayBackend

    with pytest.raises(TypeError, match="RayBackend options must be a mapping, got "):
        RayBackend(options=options)


def test_option_names_are_str() -> None:
    from polyloop.ray import RayBackend

    with pytest.raises(TypeError, match=r"options must have str keys, got 1"):
        RayBackend(options={1: 2})  # type: ignore[dict-item]


@pytest.mark.parametrize("key", ["max_retries", "retry_exceptions", "num_returns"])
def test_the_options_the_backend_sets_itself_are_refused(key: str) -> None:
    from polyloop.ray import RayBackend

    with pytest.raises(ValueError, match=f"may not set {key}: the backend sets"):
        RayBackend(options={key: 1})


def test_without_ray_the_backend_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from polyloop.ray import RayBackend

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=r"RayBackend needs Ray: pip install 'polyloop\[ray\]'"):
        RayBackend()


def test_importing_the_module_imports_no_ray() -> None:
    import subprocess

    probe = "import sys, polyloop.ray; print('ray' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "False"


# --------------------------------------------------------------------------- with Ray installed


@pytest.fixture
def ray_installed() -> None:
    require_extra("ray")


@pytest.mark.ray
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_cpus": -1}, "num_cpus cannot be negative"),
        ({"no_such_option": 1}, "Invalid option keyword no_such_option"),
        ({"runtime_env": 5}, "runtime_env"),
    ],
)
def test_options_ray_refuses_are_refused_when_the_backend_is_built(
    ray_installed: None, options: dict[str, Any], message: str
) -> None:
    from polyloop.ray import RayBackend

    with pytest.raises(ValueError, match=rf"RayBackend options refused by Ray: .*{message}"):
        RayBackend(options=options)


@pytest.mark.ray
def test_the_backend_keeps_the_batch_protocol(ray_installed: None) -> None:
    from polyloop.ray import RayBackend

    backend = RayBackend(address="auto", max_retries=1, options={"num_cpus": 0.5})
    assert isinstance(backend, Backend)
    assert repr(backend) == ("RayBackend(address='auto', max_retries=1, options={'num_cpus': 0.5})")


def _seams(task: polyloop.Task) -> polyloop.RunSeams:
    raise AssertionError("no task may be driven")


@pytest.mark.ray
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("store", "error", "message"),
    [
        (MemoryStore(), TypeError, "RayBackend needs the store as a URL"),
        ("memory:", ValueError, "cannot use the store 'memory:': each worker would have"),
    ],
)
async def test_a_store_the_workers_cannot_open_is_refused_before_any_task(
    ray_installed: None, store: Any, error: type[Exception], message: str
) -> None:
    import ray

    from polyloop.ray import RayBackend

    was_initialized = ray.is_initialized()
    with pytest.raises(error, match=message):
        await polyloop.run_many(
            AGENT,
            [polyloop.Task(id="t-0001", goal="g")],
            seams=_seams,
            store=store,
            batch="b",
            backend=RayBackend(),
        )
    assert ray.is_initialized() == was_initialized  # refused before connecting to Ray


def test_a_sqlite_path_reaches_the_workers_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polyloop.ray import _store_url

    monkeypatch.chdir(tmp_path)
    absolute = "sqlite:///" + os.path.join(str(tmp_path), "runs.db")
    assert _store_url("runs.db") == absolute
    assert _store_url("sqlite:///runs.db") == absolute
    assert _store_url(f"sqlite:///{tmp_path}/runs.db") == absolute
    dsn = "postgresql://u@127.0.0.1:5432/db"
    assert _store_url(dsn) == dsn
    with pytest.raises(ValueError, match="unsupported store URL"):
        _store_url("redis://x")

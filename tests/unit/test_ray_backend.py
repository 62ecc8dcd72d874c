"""RayBackend's arguments, its install hint and its refusals, without a Ray cluster.

The batches themselves run on a real local cluster in tests/integration/test_ray_backend.py.
What is checked before Ray is imported runs without the extra; the rest is marked ``ray``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import types
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
    from polyloop._batch._backend import worker_store_url

    def _store_url(store: str) -> str:
        return worker_store_url(store, "RayBackend")

    monkeypatch.chdir(tmp_path)
    absolute = "sqlite:///" + os.path.join(str(tmp_path), "runs.db")
    assert _store_url("runs.db") == absolute
    assert _store_url("sqlite:///runs.db") == absolute
    assert _store_url(f"sqlite:///{tmp_path}/runs.db") == absolute
    dsn = "postgresql://u@127.0.0.1:5432/db"
    assert _store_url(dsn) == dsn
    with pytest.raises(ValueError, match="unsupported store URL"):
        _store_url("redis://x")


# --------------------------------------------------------------------------- the driver's loop
#
# The driver's side of the backend against a stand-in for the `ray` module, so that what it
# does with Ray's answers is pinned without a cluster (and without the extra): how many tasks
# are in flight, what each of Ray's errors becomes, what a cancellation cancels, which
# connection it closes. The real cluster runs in tests/integration/test_ray_backend.py.


class TaskCancelledError(Exception):
    pass


class RayTaskError(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"task raised {cause!r}")
        self.cause = cause


class WorkerCrashedError(Exception):
    pass


class FakeRef:
    def __init__(self, task: polyloop.Task) -> None:
        self.task = task
        self.done: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def future(self) -> concurrent.futures.Future[Any]:
        return self.done


class FakeRay(types.ModuleType):
    """What RayBackend uses of `ray`, recording each call."""

    def __init__(self, *, initialized: bool = False, picklable: bool = True) -> None:
        super().__init__("ray")
        self.initialized = initialized
        self.picklable = picklable
        self.calls: list[str] = []
        self.sent: list[FakeRef] = []
        self.one_more = asyncio.Event()  # set at each task sent
        self.options_given: dict[str, Any] = {}
        self.exceptions = types.SimpleNamespace(
            TaskCancelledError=TaskCancelledError,
            RayTaskError=RayTaskError,
            WorkerCrashedError=WorkerCrashedError,
        )

    def in_flight(self) -> list[FakeRef]:
        return [ref for ref in self.sent if not ref.done.done()]

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, address: str | None = None) -> None:
        self.calls.append(f"init({address!r})")
        self.initialized = True

    def shutdown(self) -> None:
        self.calls.append("shutdown")
        self.initialized = False

    def put(self, value: object) -> str:
        if not self.picklable:
            raise TypeError("cannot pickle '_thread.lock' object")
        self.calls.append("put")
        return "job-ref"

    def remote(self, function: object) -> FakeRay:  # ray.remote(f): the test sends for it
        return self

    def options(self, **options: Any) -> FakeRay:
        self.options_given = options
        return self

    def cancel(self, ref: FakeRef, *, force: bool = False) -> None:
        self.calls.append(f"cancel({ref.task.id}, force={force})")
        ref.done.set_exception(TaskCancelledError())


async def sent(fake: FakeRay, count: int) -> None:
    """Until ``count`` tasks have been sent."""
    while len(fake.sent) < count:
        fake.one_more.clear()
        await fake.one_more.wait()


def _send(fake: FakeRay) -> Any:
    def send(job_ref: str, task: polyloop.Task) -> FakeRef:
        assert job_ref == "job-ref"
        ref = FakeRef(task)
        fake.sent.append(ref)
        fake.one_more.set()
        return ref

    return send


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    return fake


def _backend(fake: FakeRay, **kwargs: Any) -> Any:
    from polyloop.ray import RayBackend

    backend = RayBackend(**kwargs)
    backend._remote = types.SimpleNamespace(remote=_send(fake))
    return backend


def _job(store_url: str | None = "postgresql://u@db/runs") -> Any:
    from polyloop._batch import BatchJob

    return BatchJob(AGENT, _seams, MemoryStore(), store_url, "b", None)


def _outcome(task: polyloop.Task, what: Any = "started") -> polyloop.TaskOutcome:
    return polyloop.TaskOutcome(task_id=task.id, run_id=f"b.{task.id}", what=what)


def _tasks(count: int) -> list[polyloop.Task]:
    return [polyloop.Task(id=f"t{n}", goal=f"goal {n}") for n in range(count)]


@pytest.mark.asyncio
async def test_no_more_than_concurrency_tasks_are_in_flight_and_each_is_reported_once(
    fake_ray: FakeRay,
) -> None:
    backend = _backend(fake_ray, max_retries=2, options={"num_cpus": 0.5})
    assert fake_ray.options_given == {"max_retries": 2, "retry_exceptions": False, "num_cpus": 0.5}
    reported: list[polyloop.TaskOutcome] = []
    most = 0

    async def workers() -> None:
        nonlocal most
        while len(reported) < 10:
            await asyncio.sleep(0)
            flying = fake_ray.in_flight()
            most = max(most, len(flying))
            if flying:  # the last one sent finishes first: outcomes come in any order
                flying[-1].done.set_result(_outcome(flying[-1].task))

    finishing = asyncio.create_task(workers())
    await backend.run(_tasks(10), _job(), concurrency=3, report=reported.append)
    await finishing
    assert most == 3
    assert [ref.task.id for ref in fake_ray.sent] == [f"t{n}" for n in range(10)]
    assert sorted(o.task_id for o in reported) == sorted(f"t{n}" for n in range(10))
    assert fake_ray.calls == ["init(None)", "put", "shutdown"]


@pytest.mark.asyncio
async def test_what_ray_reports_becomes_the_tasks_outcome(fake_ray: FakeRay) -> None:
    backend = _backend(fake_ray)
    tasks = _tasks(4)
    answers: list[Any] = [
        _outcome(tasks[0], "resumed"),
        RayTaskError(ModuleNotFoundError("No module named 'my_seams'")),
        WorkerCrashedError("The worker died unexpectedly while executing this task."),
        TaskCancelledError("cancelled"),
    ]
    reported: list[polyloop.TaskOutcome] = []

    async def answer() -> None:
        await sent(fake_ray, 4)
        for ref, given in zip(fake_ray.sent, answers, strict=True):
            if isinstance(given, BaseException):
                ref.done.set_exception(given)
            else:
                ref.done.set_result(given)

    answering = asyncio.create_task(answer())
    await backend.run(tasks, _job(), concurrency=4, report=reported.append)
    await answering
    by_task = {o.task_id: o for o in reported}
    assert by_task["t0"] == answers[0]
    assert by_task["t1"] == polyloop.TaskOutcome(
        task_id="t1",
        run_id="b.t1",
        what="failed",
        error="ModuleNotFoundError: No module named 'my_seams'",
    )
    assert by_task["t2"] == polyloop.TaskOutcome(
        task_id="t2",
        run_id="b.t2",
        what="interrupted",
        error="WorkerCrashedError: The worker died unexpectedly while executing this task.",
    )
    assert by_task["t3"] == polyloop.TaskOutcome(task_id="t3", run_id="b.t3", what="interrupted")


@pytest.mark.asyncio
async def test_cancelling_force_cancels_the_tasks_in_flight_and_sends_no_more(
    fake_ray: FakeRay,
) -> None:
    backend = _backend(fake_ray)
    tasks = _tasks(5)
    reported: list[polyloop.TaskOutcome] = []
    running = asyncio.create_task(backend.run(tasks, _job(), concurrency=2, report=reported.append))
    await sent(fake_ray, 2)
    fake_ray.sent[0].done.set_result(_outcome(tasks[0]))  # done before the cancellation
    await sent(fake_ray, 3)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert [ref.task.id for ref in fake_ray.sent] == ["t0", "t1", "t2"]
    assert fake_ray.calls == [
        "init(None)",
        "put",
        "cancel(t1, force=True)",
        "cancel(t2, force=True)",
        "shutdown",
    ]
    assert [(o.task_id, o.what) for o in reported] == [
        ("t0", "started"),
        ("t1", "interrupted"),
        ("t2", "interrupted"),
    ]


@pytest.mark.asyncio
async def test_a_connection_the_backend_found_is_used_and_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRay(initialized=True)
    monkeypatch.setitem(sys.modules, "ray", fake)
    backend = _backend(fake)
    reported: list[polyloop.TaskOutcome] = []

    async def answer() -> None:
        await sent(fake, 1)
        fake.sent[0].done.set_result(_outcome(fake.sent[0].task))

    answering = asyncio.create_task(answer())
    await backend.run(_tasks(1), _job(), concurrency=8, report=reported.append)
    await answering
    assert fake.calls == ["put"]
    assert fake.initialized
    assert len(reported) == 1


@pytest.mark.asyncio
async def test_an_agent_or_factory_that_cannot_be_pickled_is_refused_and_the_connection_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRay(picklable=False)
    monkeypatch.setitem(sys.modules, "ray", fake)
    backend = _backend(fake)
    with pytest.raises(TypeError, match=r"go to the Ray workers by pickling; this one cannot be"):
        await backend.run(_tasks(2), _job(), concurrency=2, report=lambda outcome: None)
    assert fake.calls == ["init(None)", "shutdown"]
    assert fake.sent == []


@pytest.mark.asyncio
async def test_an_empty_batch_connects_to_no_cluster(fake_ray: FakeRay) -> None:
    await _backend(fake_ray).run([], _job(), concurrency=2, report=lambda outcome: None)
    assert fake_ray.calls == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("store_url", "error", "message"),
    [
        (None, TypeError, "RayBackend needs the store as a URL"),
        ("memory:", ValueError, "cannot use the store 'memory:'"),
        ("nosuch://x", ValueError, "unsupported store URL"),
    ],
)
async def test_a_store_the_workers_cannot_open_is_refused_before_connecting(
    fake_ray: FakeRay, store_url: str | None, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await _backend(fake_ray).run(
            _tasks(1), _job(store_url), concurrency=1, report=lambda outcome: None
        )
    assert fake_ray.calls == []

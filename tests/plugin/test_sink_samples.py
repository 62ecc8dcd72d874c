"""``EventSinkSamples`` reach ``event_sink.delivers_each_event_exactly_once`` through every
discovery route — a hand-written subclass's ``sink_samples``, a tag's ``samples=``, an ini line —
and without them the promise is unverifiable with a hint that names each route."""

from __future__ import annotations

from tests.plugin._sandbox import Project

DELIVERY = "event_sink.delivers_each_event_exactly_once"

SINKS = """\
from polyloop.testing import EventSinkSamples
from tests.kit.broken_delivery import BatchingShipper, SwapsBufferAfterSend, read_shipped


@pytest_polyloop.seam("event_sink", samples="shipper_samples")
@pytest.fixture
def tagged_shipper():
    return BatchingShipper()


@pytest_polyloop.seam("event_sink", samples="shipper_samples")
@pytest.fixture
def tagged_losing_shipper():
    return SwapsBufferAfterSend()


@pytest.fixture
def shipper_samples():
    return EventSinkSamples(read_back=read_shipped)


@pytest_polyloop.seam("event_sink")
@pytest.fixture
def unsampled_shipper():
    return BatchingShipper()
"""

PLUGIN = """\
import pytest

from polyloop.testing import EventSinkSamples
from tests.kit.broken_delivery import ResendsLastBatchOnFlush, read_shipped


@pytest.fixture
def plugin_shipper():
    return ResendsLastBatchOnFlush()


@pytest.fixture
def plugin_shipper_samples():
    return EventSinkSamples(read_back=read_shipped)
"""

SUBCLASS = """\
import pytest

from polyloop.testing import EventSinkContract, EventSinkSamples
from tests.kit.broken_delivery import CapsLongFields, read_shipped


class TestSubclassedShipper(EventSinkContract):
    @pytest.fixture
    def event_sink(self):
        return CapsLongFields()

    @pytest.fixture
    def sink_samples(self):
        return EventSinkSamples(read_back=read_shipped)
"""


def test_every_route_gives_the_delivery_promise_its_read_back(project: Project) -> None:
    project.conftest("tests", SINKS)
    project.write("sandbox_sink_plugin.py", PLUGIN)
    project.write("tests/test_subclassed_sink.py", SUBCLASS)
    project.pytester.syspathinsert(project.path)
    project.write(
        "pyproject.toml",
        """\
        [tool.pytest.ini_options]
        asyncio_default_fixture_loop_scope = "function"
        polyloop_seams = ["event_sink:plugin_shipper:plugin_shipper_samples"]
        """,
    )
    run = project.run("-p", "sandbox_sink_plugin", "-k", "delivers_each_event_exactly_once")

    assert run.outcome("tagged_shipper", DELIVERY) == "held", run.output
    assert run.outcome("tagged_losing_shipper", DELIVERY) == "violated", run.output
    assert run.outcome("plugin_shipper", DELIVERY) == "violated", run.output
    subclassed = next(
        entry["id"]
        for entry in run.report["implementations"]  # type: ignore[index]
        if "TestSubclassedShipper" in entry["id"]
    )
    assert run.outcome(subclassed, DELIVERY) == "violated", run.output
    unsampled = run.promise("unsampled_shipper", DELIVERY)
    assert unsampled["outcome"] == "unverifiable", run.output
    hint = unsampled["verify_yourself"]
    assert "EventSinkSamples(read_back=" in hint
    assert "`sink_samples` fixture" in hint
    assert "@pytest_polyloop.seam('event_sink', samples='<fixture>')" in hint
    assert "'event_sink:<sink fixture>:<samples fixture>' in polyloop_seams" in hint

"""The hooks of one ``--polyloop-conformance`` session: discovery → generated items → pytest
results → outcomes → report, each step in its own module. :mod:`pytest_polyloop.plugin`
registers it only when conformance mode is asked for."""

from __future__ import annotations

import datetime
import json
import platform
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

import pytest

from polyloop._base._exception_text import exception_message
from polyloop._base._utf8_json import utf8_text
from polyloop.report import ReportError, render_markdown, render_matrix_text, render_text
from pytest_polyloop import _kit
from pytest_polyloop._collect import Collection
from pytest_polyloop._conftest_errors import seam_argument_misuse
from pytest_polyloop._discovery import (
    HOW_TO_TAG,
    Misuse,
    ini_line_of,
    parse_ini_seams,
    parse_ini_waivers,
    relative_path,
    source_of,
)
from pytest_polyloop._generate import OUTER_ATTRIBUTE, PASSTHROUGH_ATTRIBUTE
from pytest_polyloop._implementations import Implementations
from pytest_polyloop._outcomes import (
    CRASH_PHASE,
    PROPERTY_ITEM,
    PROPERTY_SETUP_ERROR,
    PROPERTY_SKIP,
    PROPERTY_VIOLATION,
    PhaseResult,
    group_violation,
    phase_result,
)
from pytest_polyloop._pytest_private import fixture_functions
from pytest_polyloop._registry import SeamRegistry
from pytest_polyloop._report import (
    build_report,
    check_writable,
    environment_of,
    load_baseline,
    new_report_id,
    verdict_exit_status,
    write_json,
    write_markdown,
)
from pytest_polyloop._tagging import MARKER_HINT, MARKS_ON_FIXTURES
from pytest_polyloop._worker_discovery import WORKERINPUT_KEY, DiscoveryDrop, write_discovery

__all__ = ["ConformanceSession"]

_WORKEROUTPUT_KEY = "polyloop"
# Frames in these packages are never where an implementation's setup went wrong.
_NOT_USER_CODE = frozenset({"_pytest", "pluggy", "pytest_asyncio"})


def _utc_now() -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


class ConformanceSession:
    """The hooks of one ``--polyloop-conformance`` session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.kit = _kit.load_kit()
        _kit.check_asyncio_loaded(config)
        self.is_worker = hasattr(config, "workerinput")
        self.rootpath = config.rootpath
        self.registry = SeamRegistry(self.kit.ContractBase)
        self.worker_misuses: list[str] = []
        self.results: dict[str, list[PhaseResult]] = {}
        self.report: dict[str, Any] | None = None
        # Printed in the summary, never warnings.warn: under `-W error` or `filterwarnings =
        # error` a warning from a hook becomes an INTERNALERROR.
        self.notes: list[str] = []
        self.deselected: list[str] = []  # implementations none of whose items were selected
        self.worker_left_out: list[dict[str, Any]] = []  # registry.leave_out(...) on workers
        self.seam_filter: list[str] = list(config.getoption("polyloop_seam"))
        self.discovery_drop = DiscoveryDrop()  # xdist workers' discovery, on the controller
        if not self.is_worker:  # the controller checked; a worker must not die of it
            for option in ("polyloop_report", "polyloop_report_md"):
                check_writable(option, config.getoption(option))
        baseline = config.getoption("polyloop_baseline")
        try:
            self.baseline = load_baseline(Path(baseline)) if baseline else None
        except ReportError as error:
            raise pytest.UsageError(f"--polyloop-baseline {error}") from error
        rootpath = config.rootpath
        ini_location = relative_path(config.inipath, rootpath) if config.inipath else "ini"
        ini_tagged, seam_misuses = parse_ini_seams(config.getini("polyloop_seams"), ini_location)
        ini_waivers, waive_misuses = parse_ini_waivers(
            config.getini("polyloop_waive"), ini_line_of(config.inipath, ini_location)
        )
        self.collection = Collection(
            config=config,
            registry=self.registry,
            ini_tagged=ini_tagged,
            ini_waivers=ini_waivers,
            ini_location=ini_location,
        )
        self.collection.misuses += seam_misuses + waive_misuses
        self.implementations = Implementations(self.registry, self.kit.suite_hash, rootpath)
        _kit.register_builtin_seams(config)
        config.hook.pytest_polyloop_register_seams.call_historic(kwargs={"registry": self.registry})

    # -- collection: generated suites live under the file that defines their fixture -------

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if file_path.name == "conftest.py" and parent.session.isinitpath(file_path):
            return None  # pytest collects it as a module itself; suites are added to that one
        return self.collection.holder_for(parent, file_path)

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        if report.failed and MARKS_ON_FIXTURES in str(report.longrepr):
            report.sections.append(("polyloop", MARKER_HINT))
        if report.passed:
            if isinstance(collector, pytest.Session):
                report.result.extend(self.collection.ancestor_holders(report.result))
            elif isinstance(collector, pytest.Module):
                report.result.extend(self.collection.suites_for(collector))
        return report

    def pytest_exception_interact(
        self, node: pytest.Collector | pytest.Item, call: pytest.CallInfo[Any], report: Any
    ) -> None:
        """A hand-written subclass refused by the kit (a bad waiver or loop scope), or a conftest
        imported during collection whose ``seam(...)`` refused its arguments, is a misuse, not a
        collection error: exit 4 with its one ``path:line`` line, like a bad tag."""
        error = call.excinfo.value if call.excinfo is not None else None
        if not isinstance(report, pytest.CollectReport) or error is None:
            return
        misuse = self._subclass_misuse(error) or seam_argument_misuse(error, self.rootpath)
        if misuse is None:
            return
        self.collection.misuses.append(misuse)
        # pytest logs the report after this hook: the misuse is reported once, as a usage error.
        report.outcome, report.longrepr = "passed", None

    def _subclass_misuse(self, error: BaseException) -> Misuse | None:
        if not isinstance(error, self.kit.SubclassMisuse):
            return None
        location = relative_path(Path(error.path), self.rootpath)
        where = f"{location}:{error.line}" if error.line else location
        return Misuse(where, error.subject, error.problem)

    # -- selection: only contract items run, each knows its implementation and promise ----

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        for name in self.seam_filter:
            if self.registry.get(name) is None:
                known = ", ".join(self.registry.names())
                problem = f"unknown seam; the registered seams are: {known}"
                misuse = Misuse("command line", f"--polyloop-seam {name}", problem)
                self.collection.misuses.append(misuse)
        selected, deselected = [], []
        for item in items:
            identity = self.implementations.identify(item)
            if identity is None or (self.seam_filter and identity[0].name not in self.seam_filter):
                deselected.append(item)
                continue
            registered, implementation_id, promise_id = identity
            item.add_marker(
                pytest.mark.polyloop_seam(
                    registered.name, implementation=implementation_id, promise=promise_id
                )
            )
            item_property = {"implementation": implementation_id, "promise": promise_id}
            item.user_properties.append((PROPERTY_ITEM, json.dumps(item_property)))
            selected.append(item)
        misuses = self.collection.misuses
        if misuses:
            if not self.is_worker:
                raise pytest.UsageError(
                    "polyloop conformance: misuse of seam tags\n"
                    + "\n".join(str(misuse) for misuse in misuses)
                )
            deselected, selected = items[:], []  # the controller reports the misuse
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        items[:] = selected

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.deselected = self.implementations.keep_only(item.nodeid for item in session.items)
        for implementation_id in self.collection.unused_ini_waivers():
            self.notes.append(
                f"polyloop_waive names {implementation_id!r}, which is not a tagged or "
                "ini-named implementation collected in this run; its waivers do nothing"
            )
        if self.is_worker:
            output = {
                "implementations": self.implementations.as_list(),
                "misuses": [str(misuse) for misuse in self.collection.misuses],
                "notes": self.notes,
                "deselected": self.deselected,
                "left_out": self.registry.left_out(),
            }
            # Now, before any item runs: a worker a fixture kills never sends workeroutput.
            write_discovery(self.config.workerinput, output)  # type: ignore[attr-defined]
            self.config.workeroutput[_WORKEROUTPUT_KEY] = output  # type: ignore[attr-defined]

    # -- results ---------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        error = call.excinfo.value if call.excinfo is not None else None
        # A fresh list each time: the report shares item.user_properties, later phases must not
        # see what one phase added.
        if isinstance(error, self.kit.ContractSkip):
            skip = (PROPERTY_SKIP, json.dumps(error.as_dict()))
            report.user_properties = [*report.user_properties, skip]
        elif call.excinfo is not None and report.failed and self._is_setup_error(call):
            setup_error = self._setup_error(call.excinfo, item)
            failure = (PROPERTY_SETUP_ERROR, json.dumps(setup_error))
            report.user_properties = [*report.user_properties, failure]
        elif error is not None and report.failed:
            violation = group_violation(error)  # a FlakyFailure: the kit's message, whole
            if violation is not None:
                whole = (PROPERTY_VIOLATION, json.dumps(violation))
                report.user_properties = [*report.user_properties, whole]
        return report

    def _is_setup_error(self, call: pytest.CallInfo[None]) -> bool:
        """The implementation could not be built: a fixture raised during setup, or the samples
        it gave are of a kind the kit cannot use (found when a promise reads them)."""
        error = call.excinfo.value if call.excinfo is not None else None
        return call.when == "setup" or isinstance(error, self.kit.UnusableSamples)

    def _setup_error(
        self, excinfo: pytest.ExceptionInfo[BaseException], item: pytest.Item
    ) -> dict[str, str]:
        """The exception's type, message and where it was raised. The kit's own refusal of a
        samples object is located at the fixture that gave the samples (a tag's ``samples=``,
        a subclass's method, a conftest's fixture); the report puts the implementation
        fixture's location where neither is known."""
        if isinstance(excinfo.value, self.kit.UnusableSamples):
            location = self._samples_location(item, getattr(excinfo.value, "fixture", None))
        else:
            location = self._user_location(excinfo)
        # exception_message: an error whose __str__ raises is still one setup error
        message = exception_message(excinfo.value, limit=None)
        if isinstance(excinfo.value, pytest.fail.Exception):  # str() would add pytest's prefix
            message = excinfo.value.msg or message
        return {"type": excinfo.typename, "message": message, "location": location}

    def _samples_location(self, item: pytest.Item, fixture: str | None) -> str:
        """``path:line`` of the function that provides samples fixture ``fixture`` to ``item``:
        through the fixture a generated suite passes on (a tag's ``samples=``) and the kit's
        reader of an outer fixture of the same name; ``""`` if unknown."""
        functions = fixture_functions(item, fixture) if fixture else []
        while functions:
            function = functions.pop()
            source = getattr(function, PASSTHROUGH_ATTRIBUTE, None)
            if isinstance(source, str):
                functions = fixture_functions(item, source)
            elif not getattr(function, OUTER_ATTRIBUTE, False):
                return source_of(function, self.rootpath) if function is not None else ""
        return ""

    def _user_location(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
        """``path:line`` of the innermost frame outside pytest, its plugins and the kit (the
        report puts the fixture's location where every frame is theirs)."""
        ours = (Path(str(self.kit.__file__)).parent, Path(__file__).parent)
        for entry in reversed(excinfo.traceback):
            path = Path(entry.path)
            theirs = any(part in _NOT_USER_CODE for part in path.parts)
            if not theirs and not any(path.is_relative_to(root) for root in ours):
                return f"{relative_path(path, self.rootpath)}:{entry.lineno + 1}"
        return ""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return  # xdist ships the report to the controller, which aggregates
        # xdist builds the report of a test whose worker died itself, without our properties;
        # it is kept by node id, and the report judges only the node ids of contract items.
        crashed = report.when == CRASH_PHASE
        if crashed or any(name == PROPERTY_ITEM for name, _ in report.user_properties):
            self.results.setdefault(report.nodeid, []).append(phase_result(report))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.discovery_drop.for_worker()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", {}).get(_WORKEROUTPUT_KEY)
        if output:
            self._merge_worker_discovery(output)

    def _merge_worker_discovery(self, output: Mapping[str, Any]) -> None:
        """What one worker found (every worker collects the same items: merging repeats)."""
        self.implementations.merge(output["implementations"])
        for misuse in output["misuses"]:
            if misuse not in self.worker_misuses:
                self.worker_misuses.append(misuse)
        self.notes += [note for note in output["notes"] if note not in self.notes]
        self.deselected += [i for i in output["deselected"] if i not in self.deselected]
        for entry in output.get("left_out", []):
            if entry not in self.worker_left_out:
                self.worker_left_out.append(entry)

    # -- the report ------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            return
        for output in self.discovery_drop.collect():  # also from workers that died
            self._merge_worker_discovery(output)
        if self.config.option.collectonly:
            return
        if self.worker_misuses:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if exitstatus == pytest.ExitCode.USAGE_ERROR:
            return  # pytest's status stands
        # An internal error — pytest-xdist's own when its last workers die together (it sends
        # to a closed channel) — still reports what was found, marked interrupted and never
        # conformant: pytest's status stands.
        internal_error = exitstatus == pytest.ExitCode.INTERNAL_ERROR
        all_promises = [spec for seam in self.registry.seams() for spec in seam.suite.promises()]
        report = build_report(
            implementations=self.implementations.as_list(),
            results=self.results,
            baseline=self.baseline,
            parse_skip=self.kit.parse_skip_reason,
            kit_version=str(self.kit.KIT_VERSION),
            suite_hash=self.kit.suite_hash(all_promises),
            pytest_version=pytest.__version__,
            python_version=platform.python_version(),
            created_at=_utc_now(),
            environment=environment_of(self.config),
            report_id=new_report_id(),
            left_out=self._left_out(),
            # Ctrl-C or a collection error; -x/--maxfail (serially: pytest's status stays 1).
            interrupted=exitstatus == pytest.ExitCode.INTERRUPTED
            or internal_error
            or bool(session.shouldstop or session.shouldfail),
        )
        if internal_error and report["verdict"] == "conformant":
            report["verdict"] = "incomplete"
        self.report = report
        self.config.hook.pytest_polyloop_report(report=report, config=self.config)
        json_path = self.config.getoption("polyloop_report")
        if json_path:
            write_json(report, Path(json_path))
        md_path = self.config.getoption("polyloop_report_md")
        write_markdown(render_markdown(report), Path(md_path) if md_path else None)
        if exitstatus not in (
            pytest.ExitCode.INTERRUPTED,
            pytest.ExitCode.INTERNAL_ERROR,
        ):  # --sw, -x under xdist, Ctrl-C,
            # an internal error: pytest's status stays
            session.exitstatus = verdict_exit_status(report["verdict"])

    def _left_out(self) -> list[dict[str, Any]]:
        """What this process and every worker left out (``registry.leave_out``), one entry per
        implementation name."""
        by_name: dict[str, dict[str, Any]] = {}
        for entry in [*self.registry.left_out(), *self.worker_left_out]:
            if self.seam_filter and entry.get("seam") not in (None, *self.seam_filter):
                continue  # --polyloop-seam: another seam's implementation was not asked for
            by_name.setdefault(str(entry["implementation"]), entry)
        return [by_name[name] for name in sorted(by_name)]

    def _verbose(self) -> bool:
        """The long texts (how to verify each unverifiable promise yourself) are printed with
        ``-v`` or ``--polyloop-verbose``; the Markdown and HTML views always have them."""
        return bool(self.config.getoption("polyloop_verbose")) or self.config.option.verbose > 0

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        for note in self.notes:
            terminalreporter.write_line(f"polyloop: warning: {note}", yellow=True)
        if self.worker_misuses:
            terminalreporter.write_sep("=", "polyloop conformance: misuse of seam tags", red=True)
            for misuse in self.worker_misuses:
                terminalreporter.write_line(misuse)
            return
        if self.report is None:
            return
        verdict = self.report["verdict"]
        terminalreporter.write_sep(
            "=", "polyloop conformance", green=verdict == "conformant", red=verdict != "conformant"
        )
        width = getattr(getattr(terminalreporter, "_tw", None), "fullwidth", None)
        columns = width if isinstance(width, int) else None
        text = render_text(self.report, columns, verbose=self._verbose())
        if self.config.getoption("polyloop_matrix"):
            colour = bool(getattr(terminalreporter, "hasmarkup", False))
            text += "\n" + render_matrix_text(self.report, columns, colour=colour)
        for line in text.splitlines():
            terminalreporter.write_line(utf8_text(line))
        if verdict == "no_implementations" and self.deselected:
            terminalreporter.write_line("")
            terminalreporter.write_line(
                "Every implementation was deselected (-k, -m or node ids): "
                + ", ".join(sorted(self.deselected))
            )
        elif verdict == "no_implementations" and self.results:
            terminalreporter.write_line("")
            terminalreporter.write_line(  # contract items ran: they were found, then lost
                "Contract items ran, but what the workers discovered did not reach this process "
                "(workers on another host that crashed?): rerun without -n to get the report"
            )
        elif verdict == "no_implementations":
            terminalreporter.write_line("")
            terminalreporter.write_line(
                "No seam implementation was found. To add one, " + HOW_TO_TAG
            )

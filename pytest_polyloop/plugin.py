"""pytest entry point (``pytest11``: ``polyloop``): hook wiring only.

Passive by default: the plugin registers its options, ini keys, the ``polyloop_seam`` marker
and its two hookspecs, and does nothing else. ``--polyloop-conformance`` registers a
:class:`ConformanceSession`, which wires discovery → generated items → pytest results →
outcomes → report; each step lives in its own module.
"""

from __future__ import annotations

import datetime
import platform
import types
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_polyloop import _kit, hookspecs
from pytest_polyloop._discovery import (
    HOW_TO_TAG,
    Implementation,
    Misuse,
    TaggedFixture,
    implementation_from_tag,
    ini_holder,
    module_has_tags,
    parse_ini_seams,
    parse_ini_waivers,
    relative_path,
    tagged_fixtures,
)
from pytest_polyloop._generate import (
    HolderModule,
    generate_suite,
    implementation_of,
    is_generated,
    make_holder_module,
    make_suite_node,
)
from pytest_polyloop._outcomes import PROPERTY_ITEM, PROPERTY_SKIP, PhaseResult, phase_result
from pytest_polyloop._registry import RegisteredSeam, SeamRegistry
from pytest_polyloop._report import (
    build_report,
    load_baseline,
    verdict_exit_status,
    write_json,
    write_markdown,
)
from pytest_polyloop._tagging import MARKER_NAME

# The suites live in polyloop.testing; an editable install is not rewritten unless asked,
# and this must happen before anything imports the kit.
pytest.register_assert_rewrite("polyloop.testing")

_WORKEROUTPUT_KEY = "polyloop"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("polyloop", "polyloop contract conformance")
    group.addoption(
        "--polyloop-conformance",
        action="store_true",
        default=False,
        help="run polyloop's contract suites against every tagged seam fixture and hand-written "
        "suite subclass (and nothing else), and print the conformance report",
    )
    group.addoption(
        "--polyloop-seam",
        action="append",
        default=[],
        metavar="NAME",
        help="with --polyloop-conformance: only this seam (repeatable)",
    )
    group.addoption(
        "--polyloop-report",
        default=None,
        metavar="PATH.json",
        help="write the conformance report as JSON (schema polyloop-conformance/1)",
    )
    group.addoption(
        "--polyloop-report-md",
        default=None,
        metavar="PATH.md",
        help="write the conformance report as Markdown (also appended to $GITHUB_STEP_SUMMARY "
        "when that is set)",
    )
    group.addoption(
        "--polyloop-baseline",
        default=None,
        metavar="OLD.json",
        help="an earlier JSON report: a violated promise that never held there is 'pending' "
        "and does not fail the run; one that held there is a regression",
    )
    parser.addini(
        "polyloop_seams",
        type="linelist",
        default=[],
        help="seam implementations by fixture name, one per line: seam:fixture[:samples_fixture]",
    )
    parser.addini(
        "polyloop_waive",
        type="linelist",
        default=[],
        help="waivers, one per line: <implementation id> <promise id>: <reason>",
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER_NAME}(name, *, implementation, promise): a generated polyloop contract item "
        "(set by pytest_polyloop; tag fixtures with @pytest_polyloop.seam(...))",
    )
    if config.getoption("polyloop_conformance"):
        config.pluginmanager.register(ConformanceSession(config), "polyloop-conformance-session")


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
        self.misuses: list[Misuse] = []
        self.worker_misuses: list[str] = []
        self.implementations: dict[str, Implementation] = {}
        self.records: dict[str, dict[str, Any]] = {}
        self.results: dict[str, list[PhaseResult]] = {}
        self.report: dict[str, Any] | None = None
        self.seam_filter: list[str] = list(config.getoption("polyloop_seam"))
        baseline = config.getoption("polyloop_baseline")
        try:
            self.baseline = load_baseline(Path(baseline)) if baseline else None
        except ValueError as error:
            raise pytest.UsageError(str(error)) from error
        self.ini_path = config.inipath
        ini_location = relative_path(config.inipath, self.rootpath) if config.inipath else "ini"
        self.ini_tagged, misuses = parse_ini_seams(config.getini("polyloop_seams"), ini_location)
        self.misuses += misuses
        self.ini_waivers, misuses = parse_ini_waivers(config.getini("polyloop_waive"), ini_location)
        self.misuses += misuses
        _kit.register_builtin_seams(config)
        config.hook.pytest_polyloop_register_seams.call_historic(kwargs={"registry": self.registry})

    # -- collection: where generated suites live ------------------------------------------

    def _conftest_module(self, path: Path) -> types.ModuleType | None:
        for plugin in self.config.pluginmanager.get_plugins():
            location = getattr(plugin, "__file__", None)
            matches = location and Path(location).resolve() == path.resolve()
            if isinstance(plugin, types.ModuleType) and matches:
                return plugin
        return None

    def _holder_for(self, parent: pytest.Collector, path: Path) -> HolderModule | None:
        """A module node for a conftest with tagged fixtures or for the ini file with
        ``polyloop_seams`` — files pytest does not collect itself."""
        if path.name == "conftest.py":
            module = self._conftest_module(path)
            if module is None or not module_has_tags(module):
                return None
            return make_holder_module(parent, path, module)
        if self.ini_path is not None and path == self.ini_path and self.ini_tagged:
            return make_holder_module(parent, path, ini_holder())
        return None

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if file_path.name == "conftest.py" and parent.session.isinitpath(file_path):
            return None  # pytest collects it as a module itself; suites are added to that one
        return self._holder_for(parent, file_path)

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        if report.passed:
            if isinstance(collector, pytest.Session):
                report.result.extend(self._ancestor_holders(report.result))
            elif isinstance(collector, pytest.Module):
                report.result.extend(self._suites_for_module(collector))
        return report

    def _ancestor_holders(
        self, collected: list[pytest.Item | pytest.Collector]
    ) -> list[HolderModule]:
        """For directory arguments: implementations in conftests (and the ini file) of the
        directories above them — pytest's walk matches its way down through those directories
        but does not collect their files."""
        walked = [node.path for node in collected if isinstance(node, pytest.Directory)]
        added: set[Path] = set()
        holders: list[HolderModule] = []
        for node in collected:
            if not isinstance(node, pytest.Directory):
                continue
            for ancestor in node.iter_parents():
                if ancestor is node or not isinstance(ancestor, pytest.Directory):
                    continue
                for path in (ancestor.path / "conftest.py", self.ini_path):
                    if path is None or path.parent != ancestor.path or path in added:
                        continue
                    if any(path.is_relative_to(directory) for directory in walked):
                        continue  # the walk of a directory argument collects it
                    holder = self._holder_for(ancestor, path) if path.is_file() else None
                    if holder is not None:
                        added.add(path)
                        holders.append(holder)
        return holders

    def _tagged_in(self, module: pytest.Module) -> list[TaggedFixture]:
        if isinstance(module, HolderModule) and module.path == self.ini_path:
            return self.ini_tagged
        tagged, misuses = tagged_fixtures(module.obj, self.rootpath)
        self.misuses += misuses
        return tagged

    def _visible(self, fixture: str, node: pytest.Collector) -> bool:
        definitions = node.session._fixturemanager.getfixturedefs(fixture, node)
        return bool(definitions)

    def _suites_for_module(self, module: pytest.Module) -> list[pytest.Collector]:
        suites: list[pytest.Collector] = []
        for tagged in self._tagged_in(module):
            implementation, problems = implementation_from_tag(
                tagged, self.registry, self.ini_waivers
            )
            self.misuses += problems
            if implementation is None:
                continue
            problems = self._check_implementation(implementation, module)
            if problems:
                self.misuses += problems
                continue
            registered = self.registry.get(implementation.seam)
            assert registered is not None  # implementation_from_tag checked it
            try:
                suite_class = generate_suite(implementation, registered, module.obj.__name__)
            except (TypeError, ValueError) as error:
                self.misuses.append(
                    Misuse(implementation.source, implementation.fixture, str(error))
                )
                continue
            self.implementations[implementation.id] = implementation
            suites.append(make_suite_node(module, suite_class))
        return suites

    def _check_implementation(
        self, implementation: Implementation, module: pytest.Module
    ) -> list[Misuse]:
        def misuse(problem: str) -> Misuse:
            return Misuse(implementation.source, implementation.fixture, problem)

        problems = []
        earlier = self.implementations.get(implementation.id)
        if earlier is not None:
            problems.append(
                misuse(
                    f"implementation id {implementation.id!r} is already used by {earlier.source}: "
                    "ids must be unique in the session; pass id='...' to seam(...)"
                )
            )
        if implementation.route == "ini" and not self._visible(implementation.fixture, module):
            problems.append(
                misuse(
                    f"polyloop_seams names fixture {implementation.fixture!r}, which does not exist"
                )
            )
        if implementation.samples is not None and not self._visible(implementation.samples, module):
            problems.append(
                misuse(
                    f"samples fixture {implementation.samples!r} not found: define it next to "
                    f"the fixture (it must return the {implementation.seam} samples)"
                )
            )
        return problems

    # -- selection: only contract items run, each knows its implementation and promise ----

    def _identify(self, item: pytest.Item) -> tuple[RegisteredSeam, str, str] | None:
        cls = getattr(item, "cls", None)
        if cls is None:
            return None
        registered = self.registry.suite_of(cls)
        if registered is None:
            return None
        test_name = getattr(item, "originalname", item.name)
        spec = next((s for s in registered.suite.promises() if s.test_name == test_name), None)
        if spec is None:
            return None
        base_id = implementation_of(cls).id if is_generated(cls) else self._class_id(item)
        callspec = getattr(item, "callspec", None)
        implementation_id = f"{base_id}[{callspec.id}]" if callspec is not None else base_id
        record = self.records.get(implementation_id)
        if record is None:
            record = self._new_record(implementation_id, cls, registered, item)
            self.records[implementation_id] = record
        record["items"][item.nodeid] = spec.id
        return registered, implementation_id, spec.id

    def _class_id(self, item: pytest.Item) -> str:
        parent = item.getparent(pytest.Class)
        return parent.nodeid if parent is not None else item.nodeid

    def _new_record(
        self, implementation_id: str, cls: type[Any], registered: RegisteredSeam, item: pytest.Item
    ) -> dict[str, Any]:
        promises = registered.suite.promises()
        if is_generated(cls):
            implementation = implementation_of(cls)
            fixture, source = implementation.fixture, implementation.source
            waive, overridden = dict(implementation.waive), []
        else:
            path, line = _class_location(cls)
            fixture = registered.suite.seam
            source = f"{relative_path(Path(path), self.rootpath)}:{line}"
            waive = dict(getattr(cls, "waive", {}) or {})
            overridden = [
                spec.id
                for spec in promises
                if getattr(cls, spec.test_name, None) is not spec.function
            ]
        return {
            "id": implementation_id,
            "seam": registered.name,
            "fixture": fixture,
            "source": source,
            "suite_hash": self.kit.suite_hash(promises),
            "catalogue": [{"id": s.id, "doc": s.doc, "kind": s.kind} for s in promises],
            "waive": waive,
            "overridden": overridden,
            "items": {},
        }

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        for name in self.seam_filter:
            if self.registry.get(name) is None:
                known = ", ".join(self.registry.names())
                problem = f"unknown seam; the registered seams are: {known}"
                self.misuses.append(Misuse("command line", f"--polyloop-seam {name}", problem))
        selected, deselected = [], []
        for item in items:
            identity = self._identify(item)
            if identity is None or (self.seam_filter and identity[0].name not in self.seam_filter):
                deselected.append(item)
                continue
            registered, implementation_id, promise_id = identity
            item.add_marker(
                pytest.mark.polyloop_seam(
                    registered.name, implementation=implementation_id, promise=promise_id
                )
            )
            item.user_properties.append(
                (PROPERTY_ITEM, {"implementation": implementation_id, "promise": promise_id})
            )
            selected.append(item)
        if self.misuses:
            if not self.is_worker:
                raise pytest.UsageError(
                    "polyloop conformance: misuse of seam tags\n"
                    + "\n".join(str(misuse) for misuse in self.misuses)
                )
            deselected, selected = items[:], []  # the controller reports the misuse
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        items[:] = selected

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        running = {item.nodeid for item in session.items}
        for implementation_id in list(self.records):
            record = self.records[implementation_id]
            record["items"] = {n: p for n, p in record["items"].items() if n in running}
            if not record["items"]:
                del self.records[implementation_id]  # deselected entirely: not judged
        if self.is_worker:
            self.config.workeroutput[_WORKEROUTPUT_KEY] = {  # type: ignore[attr-defined]
                "records": list(self.records.values()),
                "misuses": [str(misuse) for misuse in self.misuses],
            }

    # -- results ---------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        error = call.excinfo.value if call.excinfo is not None else None
        if isinstance(error, self.kit.ContractSkip):
            # A fresh list: the report shares item.user_properties, later phases must not see it.
            report.user_properties = [*report.user_properties, (PROPERTY_SKIP, error.as_dict())]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return  # xdist ships the report to the controller, which aggregates
        if any(name == PROPERTY_ITEM for name, _ in report.user_properties):
            self.results.setdefault(report.nodeid, []).append(phase_result(report))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", {}).get(_WORKEROUTPUT_KEY)
        if not output:
            return
        for record in output["records"]:
            merged = self.records.setdefault(record["id"], {**record, "items": {}})
            merged["items"].update(record["items"])
        for misuse in output["misuses"]:
            if misuse not in self.worker_misuses:
                self.worker_misuses.append(misuse)

    # -- the report ------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker or self.config.option.collectonly:
            return
        if self.worker_misuses:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if exitstatus not in (
            pytest.ExitCode.OK,
            pytest.ExitCode.TESTS_FAILED,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            return  # interrupted, internal or usage error: pytest's status stands
        all_promises = [spec for seam in self.registry.seams() for spec in seam.suite.promises()]
        report = build_report(
            records=list(self.records.values()),
            results=self.results,
            baseline=self.baseline,
            parse_skip=self.kit.parse_skip_reason,
            kit_version=str(self.kit.KIT_VERSION),
            suite_hash=self.kit.suite_hash(all_promises),
            pytest_version=pytest.__version__,
            python_version=platform.python_version(),
            created_at=_utc_now(),
        )
        self.report = report
        self.config.hook.pytest_polyloop_report(report=report, config=self.config)
        from polyloop._report_cli import render_markdown

        json_path = self.config.getoption("polyloop_report")
        if json_path:
            write_json(report, Path(json_path))
        md_path = self.config.getoption("polyloop_report_md")
        write_markdown(render_markdown(report), Path(md_path) if md_path else None)
        session.exitstatus = verdict_exit_status(report["verdict"])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        if self.worker_misuses:
            terminalreporter.write_sep("=", "polyloop conformance: misuse of seam tags", red=True)
            for misuse in self.worker_misuses:
                terminalreporter.write_line(misuse)
            return
        if self.report is None:
            return
        from polyloop._report_cli import render_text

        verdict = self.report["verdict"]
        terminalreporter.write_sep(
            "=", "polyloop conformance", green=verdict == "conformant", red=verdict != "conformant"
        )
        for line in render_text(self.report).splitlines():
            terminalreporter.write_line(line)
        if verdict == "no_implementations":
            terminalreporter.write_line("")
            terminalreporter.write_line(
                "No seam implementation was found. To add one, " + HOW_TO_TAG
            )


def _class_location(cls: type[Any]) -> tuple[str, int]:
    import inspect

    try:
        path = inspect.getsourcefile(cls) or "?"
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return getattr(cls, "__module__", "?"), 0
    return path, line

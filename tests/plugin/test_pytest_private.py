"""The plugin's two uses of pytest internals (``pytest_polyloop._pytest_private``) work on the
installed pytest: CI runs this on the newest pytest and on the oldest supported (8.4.x), so a
pytest that renames them fails here, not as a silent change of behaviour."""

from __future__ import annotations

import pytest

from pytest_polyloop._pytest_private import fixture_visible, set_ini_default

_ARGS = ("-p", "no:randomly", "-o", "asyncio_default_fixture_loop_scope=function")


def test_an_ini_default_set_at_configure_time_is_what_getini_returns(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        from pytest_polyloop._pytest_private import set_ini_default

        def pytest_addoption(parser):
            parser.addini("probe_key", "a string key", type="string", default=None)

        def pytest_configure(config):
            assert config.getini("probe_key") in (None, "")  # read (and cached) first
            assert set_ini_default(config, "probe_key", "function")
        """
    )
    pytester.makepyfile(
        """
        def test_seen(pytestconfig):
            assert pytestconfig.getini("probe_key") == "function"
        """
    )
    pytester.runpytest(*_ARGS).assert_outcomes(passed=1)


def test_a_fixture_is_visible_from_the_module_that_can_use_it_and_no_other(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import pytest
        from pytest_polyloop._pytest_private import fixture_visible

        @pytest.fixture
        def everywhere(): return 1

        seen = {}

        def pytest_collection_modifyitems(session, items):
            for item in items:
                module = item.getparent(pytest.Module)
                seen[module.name] = tuple(
                    fixture_visible(name, module)
                    for name in ("everywhere", "only_in_a", "nowhere", "tmp_path")
                )
            assert seen == {
                "test_a.py": (True, True, False, True),
                "test_b.py": (True, False, False, True),
            }, seen
        """
    )
    pytester.makepyfile(
        test_a="""
        import pytest

        @pytest.fixture
        def only_in_a(): return 2

        def test_a(): pass
        """,
        test_b="def test_b(): pass\n",
    )
    pytester.runpytest(*_ARGS).assert_outcomes(passed=2)


def test_each_falls_back_to_doing_no_harm_without_the_internals() -> None:
    class Bare:
        session = object()

    assert set_ini_default(object(), "key", "value") is False  # type: ignore[arg-type]
    assert fixture_visible("anything", Bare()) is True  # type: ignore[arg-type]

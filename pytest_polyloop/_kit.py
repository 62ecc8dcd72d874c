"""Loading ``polyloop.testing`` (the contract kit) only when conformance mode asks for it.

The kit needs the ``testing`` extra (pytest-asyncio, Hypothesis). Loading *this plugin* must
never need it — only ``--polyloop-conformance`` does, and then a missing dependency is a usage
error with an install hint, not an ImportError trace.
"""

from __future__ import annotations

import importlib
import types

import pytest

from pytest_polyloop._registry import SeamRegistry

__all__ = ["INSTALL_HINT", "check_asyncio_loaded", "load_kit", "register_builtin_seams"]

INSTALL_HINT = "pip install 'polyloop[testing]'"


def load_kit() -> types.ModuleType:
    """Import ``polyloop.testing`` or raise ``pytest.UsageError`` saying what to install."""
    try:
        return importlib.import_module("polyloop.testing")
    except ImportError as error:
        # polyloop.testing re-raises with its own hint, the missing module is its cause's name.
        missing = error.name or getattr(error.__cause__, "name", None) or str(error)
        raise pytest.UsageError(
            f"--polyloop-conformance needs polyloop's `testing` extra, but {missing!r} cannot be "
            f"imported. Install it with: {INSTALL_HINT}"
        ) from error


def check_asyncio_loaded(config: pytest.Config) -> None:
    """Raise ``pytest.UsageError`` unless pytest-asyncio is installed *and* loaded.

    The suites' async promises need it; the plugin never force-loads it (that would override a
    user who disabled it on purpose), it says how to load it.
    """
    if config.pluginmanager.hasplugin("asyncio"):
        return
    try:
        importlib.import_module("pytest_asyncio")
    except ImportError as error:
        raise pytest.UsageError(
            "--polyloop-conformance runs async contract promises and needs pytest-asyncio, "
            f"which is not installed. Install it with: {INSTALL_HINT}"
        ) from error
    raise pytest.UsageError(
        "--polyloop-conformance runs async contract promises and needs pytest-asyncio, which is "
        "installed but not loaded in this session (disabled with `-p no:asyncio`, or plugin "
        "autoloading is off via PYTEST_DISABLE_PLUGIN_AUTOLOAD). Load it with `-p asyncio` on "
        "the command line or `addopts = -p asyncio` in your pytest configuration."
    )


def register_builtin_seams(config: pytest.Config) -> None:
    """Register the hookimpl that adds the five built-in seams (like any third party would)."""
    config.pluginmanager.register(_BuiltinSeams(), "polyloop-builtin-seams")


class _BuiltinSeams:
    """The five built-in seams, registered through ``pytest_polyloop_register_seams``."""

    @pytest.hookimpl
    def pytest_polyloop_register_seams(self, registry: SeamRegistry) -> None:
        kit = load_kit()
        for name, suite in kit.BUILTIN_SUITES.items():
            registry.add(name, suite, suite.samples_fixture)

"""polyloop's version, defined here once.

Read by the build (``[tool.hatch.version]`` in pyproject.toml), re-exported as
``polyloop.__version__``, and reported by the contract kit as ``KIT_VERSION``. Nothing else is
in this module, so anything can import it cheaply.
"""

from __future__ import annotations

__version__ = "0.1.0"

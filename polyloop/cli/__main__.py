"""``python -m polyloop.cli``: the ``polyloop`` command."""

import sys

from polyloop.cli import main

sys.exit(main())

from __future__ import annotations

import sys

from pdlite.tools.cli import main

sys.exit(main())

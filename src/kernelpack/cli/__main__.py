"""``python -m kernelpack.cli``."""

import sys

from .main import main

sys.exit(main())

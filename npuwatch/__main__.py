"""Provides ``python -m npuwatch``."""

from __future__ import annotations

import sys

from npuwatch.cli import main

sys.exit(main())

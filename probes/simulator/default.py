"""Provides DEFAULT_SCENARIO: the scenario ``--demo`` runs when none is named.

A leaf module, so every command can name it cheaply (``catalog`` builds every scenario's
dataclasses on import, several milliseconds) and ``machine`` can use it without importing the
package that lazily imports ``machine``.
"""

from __future__ import annotations

#: An 8×910B3 node training a model.
DEFAULT_SCENARIO = "910b-training"

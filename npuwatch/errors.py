"""Provides UsageError: the one error type for a bad option, value or combination (the CLI's exit 64).

Every command, the notebook API and the ``%npuwatch`` magic raise it (or a subclass naming the
command) for what the user asked wrongly; the CLI catches this type and exits 64 (BSD sysexits
``EX_USAGE``, docs/design.md §2.1), the magic prints it as one line.  Anything else is a bug.  This module
imports nothing, so every layer may raise it.
"""

from __future__ import annotations


class UsageError(ValueError):
    """A bad option, value or combination of options: exit 64 with the message, never a traceback."""


class VariableError(UsageError):
    """An ``NPUWATCH_*`` variable whose value cannot be used; ``hint`` says how to mend it.

    A usage error like any other, except for ``npuwatch check``: there a broken environment is an
    unhealthy verdict (exit 1), since the variable was set by the container, not typed.
    """

    def __init__(self, message: str, variable: str, hint: str) -> None:
        super().__init__(message)
        self.variable = variable
        self.hint = hint

"""npuwatch.widgets.tui: the live terminal dashboard (textual)."""

"""npuwatch.widgets: rendering of snapshots (no hardware reads; UI libraries imported lazily)."""

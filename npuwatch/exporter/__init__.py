"""Provides ``npuwatch serve``: a Prometheus exporter, npu-exporter's metric names (docs/design.md §2.4)."""

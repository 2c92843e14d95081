"""Provides ``npuwatch serve``: a Prometheus exporter with npu-exporter's metric names (DESIGN §2.4)."""

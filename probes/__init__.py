"""npuwatch.probes: everything that reads hardware and environment (headless: stdlib + psutil)."""

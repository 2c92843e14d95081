"""The per-chip link enrichers: each adds one kind of link to every chip, on its own cadence.

``registry.ENRICHERS`` lists them (the PCIe link from the sampler's PCI scan first); the sampler
runs them through ``registry.LinkEnrichers`` only.  A new kind of link (RoCE, HCCS) is one
module here and one line in ``ENRICHERS``; the judge (``npuwatch.judge.links``), the views, the
JSON and ``/metrics`` take every kind as it comes.
"""

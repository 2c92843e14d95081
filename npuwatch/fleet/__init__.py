"""Provides ``npuwatch fleet``: many nodes' NPUs through Prometheus or their ``npuwatch serve``.

``model`` holds the records (``FleetSnapshot`` → ``FleetNode`` → ``FleetChip``); ``prometheus`` the
HTTP API client, ``series`` turns its vectors into nodes, ``hosts`` polls ``/snapshot``, ``feed`` is the
fleet feed (sample + history, record and replay), ``fleet_json`` the ``npuwatch/fleet/v1`` JSON and
``command`` the command line.
"""

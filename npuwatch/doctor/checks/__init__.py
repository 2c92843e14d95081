"""One module per doctor check; each defines ``CHECK`` (registered in npuwatch.doctor.registry)."""

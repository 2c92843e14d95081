"""npuwatch.probes.simulator.dcmi_fake: the demos' and tests' fake DCMI library, in C and in Python.

``fake_dcmi.c`` (package data) is our own C implementation of the functions npuwatch calls, with
the reference's structure layouts, answering from a state file and injecting faults (return
codes, hangs, segfaults, missing symbols); ``build`` compiles it once per user, ``standin`` is
the pure-Python twin for machines without a compiler (``standin_state`` reads the state file,
``standin_args`` takes C's arguments, ``standin_core`` holds the C helpers), ``state`` writes
the state file from the simulator, ``install`` puts the library in a demo machine.  Nothing here
is imported by the product outside a demo.
"""

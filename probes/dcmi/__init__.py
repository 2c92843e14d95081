"""npuwatch.probes.dcmi: the in-process DCMI chip source (``libdcmi.so`` through ctypes).

``abi`` declares the library's structures and prototypes, ``records`` the plain records a read
produces; the library loader, the reader, the worker process that runs the calls under a
deadline, the ``DcmiSource`` and the fake library of the demos live beside them.
"""

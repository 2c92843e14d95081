"""The DCMI worker process: ``python -m npuwatch.probes.dcmi.worker`` (``child.child_main``)."""

import sys

from npuwatch.probes.dcmi.worker.child import child_main

sys.exit(child_main(sys.argv[1:]))

"""Run under `mpiexec -n 2 python tests/_dist_fail.py raise|exit`: rank 1 fails after joining the
process group (an uncaught exception, or `sys.exit(3)`) while rank 0 waits in an all_reduce that
rank 1 never enters. The job must end (non-zero) instead of hanging: through `python -m mpi4py`
or, for a plain `python script.py`, ember.distributed's own abort handling."""
import sys
import time

import ember
import ember.distributed as dist

dist.init_process_group("mpi")
if dist.get_rank() == 1:
    time.sleep(0.2)  # let rank 0 enter the collective first
    if sys.argv[1:] == ["exit"]:
        print("rank 1 failed on purpose: sys.exit(3)", flush=True)
        sys.exit(3)
    raise RuntimeError("rank 1 failed on purpose")
t = ember.ones(4)
dist.all_reduce(t)  # never completes: rank 1 is gone
print("rank 0 left the all_reduce: the job was not aborted", flush=True)

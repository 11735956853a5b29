"""`python -m mpi4py tests/_dist_cli.py ARGS...` runs `python -m ember ARGS...` on one MPI rank, with
CUDA from tests/_fakecuda.py where there is no GPU, and then prints what the fake NCCL carried
(`NCCL rank R: {(device, collective): calls}`), so tests see which GPU each rank used and that
gradients went over NCCL."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember  # noqa: E402
from ember.cli import main  # noqa: E402

if not ember.cuda.is_available():
    import _fakecuda
    _fakecuda.install()
else:
    _fakecuda = None

status = main(sys.argv[1:])
if _fakecuda is not None:
    print(f"NCCL rank {os.environ.get('RANK')}: {dict(sorted(_fakecuda.NCCL_CALLS.items()))}", flush=True)
sys.exit(status)

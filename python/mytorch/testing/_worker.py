"""Alignment worker: a subprocess that runs OpInfos on request (the protocol is in _pool.py).

It reads one JSON request per line on stdin and answers one JSON line per request on the file descriptor
named by MYTORCH_WORKER_FD; fd 1 is pointed at stderr so that nothing a kernel prints can corrupt the protocol.
"""

import importlib
import json
import os
import sys
import warnings


def main() -> None:
    proto = os.fdopen(int(os.environ["MYTORCH_WORKER_FD"]), "w", buffering=1)
    os.dup2(2, 1)
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    import mytorch  # noqa: F401
    from torch.testing._internal.common_methods_invocations import op_db

    from ._cases import run_op

    for name in filter(None, os.environ.get("MYTORCH_ALIGN_PRELOAD", "").split(",")):
        importlib.import_module(name)  # test hooks: deliberately broken or crashing kernels
    cuda_reference = torch.mytorch.runtime() == "cuda" and torch.cuda.is_available()
    proto.write(json.dumps({"ready": True, "ops": len(op_db)}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        op = op_db[req["index"]]
        try:
            cases = run_op(op, req["dtypes"], req["max_samples"], cuda_reference)
        except Exception as e:  # a failure outside any sample: report it, keep serving
            cases = [
                {"op": req["key"], "dtype": d, "verdict": "error", "detail": f"runner: {type(e).__name__}: {e}"[:300]}
                for d in req["dtypes"]
            ]
        proto.write(json.dumps({"index": req["index"], "cases": cases}) + "\n")


if __name__ == "__main__":
    main()

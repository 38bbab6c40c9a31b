"""One GPU client of the sharing checks: a bf16 matrix-product loop run in timed windows (PyTorch).

Started by `check_sharing.py` with the environment the runtime's Allocate returned for its container
(MPS or HAMi-core limits). It makes its matrices, warms up, writes `ready` (its PID), waits for the
`go` file (an epoch in seconds), then for each window of its plan waits for the window's start and:
- `run`: multiplies until the window ends, counting finished products (a sync every `batch`);
- `oom`: runs, and halfway asks for `oom_mib` more device memory once (its error is recorded) and
  runs on;
- `crash`: runs, and halfway kills itself (SIGKILL), as a client that dies mid-work;
- `fault`: runs, and halfway launches a kernel that writes to an invalid address (CuPy), as a
  client with a GPU fault;
- `idle`: nothing (the client stays connected).
Each window's result is a JSON line appended to `out` at once (rate in products per second, TFLOP/s,
a timeline of finished products every 0.25 s, the error of an oom or fault).

Usage: python gpu_client.py PLAN.json   (keys: name, out, ready, go, size, batch, oom_mib, windows)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

TIMELINE_STEP_S = 0.25


def append(out: Path, record: dict[str, Any]) -> None:
    with out.open("a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


class Torch:
    """n×n bf16 products on the GPU."""

    def __init__(self, n: int) -> None:
        import torch

        self.torch = torch
        self.x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.z = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        self.run(3)

    def run(self, count: int) -> None:
        for _ in range(count):
            self.torch.matmul(self.x, self.y, out=self.z)
        self.torch.cuda.synchronize()

    def allocate(self, mib: int) -> str:
        """Ask for `mib` more device memory and touch it; '' when granted, else the error."""
        try:
            extra = self.torch.empty(mib << 20, dtype=self.torch.uint8, device="cuda")
            extra.fill_(1)
            self.torch.cuda.synchronize()
            del extra
            return ""
        except Exception as exc:
            return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        finally:
            self.torch.cuda.empty_cache()

    def fault(self) -> str:
        """Write through an invalid device pointer (CuPy, on the same primary context); the error CUDA reports."""
        import cupy

        kernel = cupy.RawKernel(r'extern "C" __global__ void bad(int* p) { p[0] = 1; }', "bad")
        try:
            kernel((1,), (1,), (cupy.uint64(0x10),))
            cupy.cuda.Device().synchronize()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "no error"


class Numpy:
    """A dry run's stand-in on the CPU (no GPU here): the same loop, so the check's own logic runs."""

    def __init__(self, n: int) -> None:
        import numpy

        self.x = numpy.ones((n, n), dtype=numpy.float32)

    def run(self, count: int) -> None:
        for _ in range(count):
            self.x @ self.x

    def allocate(self, mib: int) -> str:
        return f"dry run: no device memory to ask {mib} MiB of"

    def fault(self) -> str:
        return "dry run: no device to fault"


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    out = Path(plan["out"])
    n, batch = int(plan.get("size", 8192)), int(plan.get("batch", 8))
    try:
        work = Numpy(n) if plan.get("dry") else Torch(n)
    except Exception as exc:
        append(out, {"name": plan["name"], "error": f"start: {type(exc).__name__}: {exc}"})
        Path(plan["ready"]).write_text(str(os.getpid()))
        return 1
    Path(plan["ready"]).write_text(str(os.getpid()))
    go_file = Path(plan["go"])
    while not go_file.exists():
        time.sleep(0.01)
    go = float(go_file.read_text())
    flop = 2.0 * n**3
    for index, window in enumerate(plan["windows"]):
        action = window["action"]
        start, end = go + window["start"], go + window["start"] + window["seconds"]
        time.sleep(max(0.0, start - time.time()))
        if action == "idle":
            continue
        record: dict[str, Any] = {"name": plan["name"], "window": window.get("index", index), "action": action}
        done, timeline, event_done = 0, [], False
        next_mark = start + TIMELINE_STEP_S
        began = time.time()
        try:
            while time.time() < end:
                work.run(batch)
                done += batch
                now = time.time()
                while now >= next_mark:
                    timeline.append(done)
                    next_mark += TIMELINE_STEP_S
                if not event_done and action != "run" and now >= start + window["seconds"] / 2:
                    event_done = True
                    record["event_at_s"] = round(now - start, 3)
                    if action == "oom":
                        record["oom_error"] = work.allocate(int(plan["oom_mib"]))
                    elif action == "crash":
                        record |= {"matmuls": done, "seconds": round(now - began, 3), "timeline": timeline}
                        append(out, record | {"crashed": True})
                        os.kill(os.getpid(), signal.SIGKILL)
                    elif action == "fault":
                        record["fault_error"] = work.fault()
                        append(out, record)
                        return 3
        except Exception as exc:
            record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        elapsed = time.time() - began
        record |= {
            "matmuls": done,
            "seconds": round(elapsed, 3),
            "rate": done / elapsed if elapsed > 0 else 0.0,
            "tflops": round(done * flop / elapsed / 1e12, 1) if elapsed > 0 else 0.0,
            "timeline": timeline,
        }
        append(out, record)
        if "error" in record:
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

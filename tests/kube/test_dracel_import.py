"""The CEL package is imported when a selector is first compiled, not when the scheduler is: `cel`
imports its REPL (prompt_toolkit) with it, a third of a second of every `runtimekit scheduler`,
`simulate` and `extender` start (and of every test that runs one)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import runtimekit.scheduler.framework, runtimekit.kube.semantics.draalloc
assert "cel" not in sys.modules, "cel imported with the scheduler"
from runtimekit.kube.semantics import dracel
selector = dracel.compile_selector('device.driver == "gpu.example.com"')
variable = dracel.device_variable("gpu.example.com", {"name": "gpu-0"})
assert dracel.matches(selector, variable) and dracel.matches(selector, dracel.device_context(variable))
print("ok")
"""


def test_the_scheduler_imports_cel_only_when_a_selector_is_compiled() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"

"""What a simulated container does: `plan(container, env)` reads its command line and says what it
prints, how long it runs and how it exits, without running anything.

The rules, documented in docs/user-guide/embedded-cluster.md ("Simulated containers"):
- no `command` and no `args`: the image's own entrypoint, taken to be a server: it keeps running;
- otherwise the command line (`command` + `args`; `sh|bash|ash|dash -c SCRIPT` reads SCRIPT) is a
  list of simple commands joined by `;`, `&&`, `||` or newlines, which the simulator interprets:
  `echo` and `printf` print, `sleep N` (seconds, or with a `s`/`m`/`h`/`d` suffix) waits N seconds,
  `exit N` ends with N, `true`/`:` and `false` set the status, `hostname` prints the pod's name,
  `env`/`printenv` print the environment; the container ends with the last status;
- the first command it cannot interpret (a program, a loop, a pipe, a background job, `sleep
  infinity`) makes the container keep running from there on, as would a container whose sleeps add
  up to more than `MAX_RUN_S` (`sleep 86400` is how manifests say "forever").
Pure functions; the caller (`SimulatedKubelet`) adds its own start-up delay and runs the timers.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtimekit.cluster.kubelet.runner import command_line
from runtimekit.kube.objects import Container

MAX_RUN_S = 3600.0  # sleeps that add up to more than an hour: the container keeps running
SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh"})
_OPERATORS = frozenset({";", "&&", "||"})
_SLEEP = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$")
_SLEEP_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclass(frozen=True)
class Output:
    """A line the container prints, `at_s` seconds after it started."""

    at_s: float
    text: str


@dataclass(frozen=True)
class Plan:
    """What one run of a container does. `run_s` None: it keeps running (until stopped)."""

    output: tuple[Output, ...]
    run_s: float | None
    exit_code: int = 0

    @property
    def finishes(self) -> bool:
        return self.run_s is not None


def script_of(argv: Sequence[str]) -> str | None:
    """The shell script a command line runs (`sh -c SCRIPT`), else the command line quoted as one command."""
    if argv and posixpath.basename(argv[0]) in SHELLS:
        rest = list(argv[1:])
        if rest and rest[0] == "-c":
            rest = rest[1:]
            if rest and rest[0] == "--":
                rest = rest[1:]
            return rest[0] if rest else ""
        return None  # an interactive shell, or a script file: keeps running
    return shlex.join(argv)


def _statements(script: str) -> list[tuple[str, list[str]]] | None:
    """(operator before, words) per simple command; None when the script has other syntax (pipes,
    background jobs, redirections we do not follow)."""
    lexer = shlex.shlex(script.replace("\n", ";"), posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: sh would fail, but say so as a program would
        return None
    out: list[tuple[str, list[str]]] = []
    operator, words = ";", list[str]()
    for token in tokens:
        if token in _OPERATORS:
            if words:
                out.append((operator, words))
            operator, words = token, []
        elif token and set(token) <= set("&|<>()"):
            return None
        else:
            words.append(token)
    if words:
        out.append((operator, words))
    return out


def _expand(word: str, env: Mapping[str, str]) -> str:
    return _VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), word)


def _printf(words: list[str]) -> str:
    if not words:
        return ""
    text, args = words[0].replace("\\n", "\n").replace("\\t", "\t"), list(words[1:])
    return re.sub(r"%[sd]", lambda _m: args.pop(0) if args else "", text).replace("%%", "%")


def plan(container: Container, env: Mapping[str, str], hostname: str) -> Plan:
    """What the container does (see the module docstring); `env` is its environment (for `$VAR` and
    `env`), `hostname` the pod's name."""
    argv = command_line(container)
    if not argv:
        return Plan((), None)
    script = script_of(argv)
    statements = None if script is None else _statements(script)
    if statements is None:
        return Plan((), None)
    output: list[Output] = []
    clock, status = 0.0, 0
    for operator, raw in statements:
        if (operator == "&&" and status != 0) or (operator == "||" and status == 0):
            continue
        words = [_expand(w, env) for w in raw]
        name, args = words[0], words[1:]
        printed: str | None = None
        if name == "echo":
            newline = not (args and args[0] == "-n")
            args = [a for a in args if a not in ("-n", "-e", "-E")]
            printed, status = " ".join(args) + ("\n" if newline else ""), 0
        elif name == "printf":
            printed, status = _printf(args), 0
        elif name == "sleep":
            match = _SLEEP.match(args[0]) if len(args) == 1 else None
            if args == ["infinity"]:
                return Plan(tuple(output), None)
            if match is None:
                printed, status = "sleep: invalid number\n", 1
            else:
                clock += float(match.group(1)) * _SLEEP_UNIT[match.group(2)]
                if clock > MAX_RUN_S:
                    return Plan(tuple(output), None)
                status = 0
        elif name == "exit":
            code = int(args[0]) % 256 if args and args[0].lstrip("-").isdigit() else status
            return Plan(tuple(output), clock, code)
        elif name in ("true", ":"):
            status = 0
        elif name == "false":
            status = 1
        elif name == "hostname":
            printed, status = hostname + "\n", 0
        elif name in ("env", "printenv") and not args:
            printed, status = "".join(f"{k}={v}\n" for k, v in sorted(env.items())), 0
        else:
            return Plan(tuple(output), None)
        if printed:
            output.extend(Output(clock, line) for line in printed.splitlines())
    return Plan(tuple(output), clock, status)

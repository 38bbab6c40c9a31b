"""Volcano's scheduler command line (`vc-scheduler`), read as Volcano reads it, beside the kit's own flags.

Volcano parses its flags with pflag: a boolean flag is `--name` or `--name=VALUE` (never `--name
VALUE`: the word after it is a stray argument), other flags take `--name=VALUE` or `--name VALUE`,
`_` and `-` are the same in a name (klog's `--log_dir` is `--log-dir`), durations are Go's (`1s`,
`500ms`, `1m30s`), and stray arguments are ignored (Volcano's chart passes `2>&1` as one). Before
argparse sees the arguments, `normalise` rewrites the boolean flags to `--name=true|false`, takes out
the flags that cannot mean anything here (each leaves a one-line warning naming it), and sets stray
arguments aside, also with a warning. docs/user-guide/coming-from-volcano.md lists every flag.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# Boolean flags the scheduler implements (pflag syntax: `--name` or `--name=VALUE`).
BOOLEANS = frozenset(
    {"allow-conf-without-gpu-plugin", "enable-healthz", "enable-metrics", "leader-elect", "logtostderr", "version"}
)

# Volcano flags accepted for compatibility that change nothing here: name -> (takes a value, value
# that agrees with what the scheduler does anyway or None, why it has no effect).
_IGNORED: dict[str, tuple[bool, str | None, str]] = {
    "resync-period": (True, None, "informers here never resync; they re-list only after a watch expires"),
    "priority-class": (False, "true", "pod priorities are always honoured"),
    "csi-storage": (False, None, "CSI storage capacity is not part of scheduling here"),
    "enable-pprof": (False, "false", "there is no Go profiler; use py-spy on the process"),
    "node-selector": (True, None, "every node is considered; restrict GPU pods with nodeSelector instead"),
    "cache-dumper": (False, "false", "there is no cache dumper"),
    "cache-dump-dir": (True, None, "there is no cache dumper"),
    "node-worker-threads": (True, None, "node events are handled by one informer thread"),
    "gate-removal-worker-num": (True, None, "scheduling gates are not removed by this scheduler"),
    "ignored-provisioners": (True, None, "persistent volume claims are not counted here"),
    "resource-sync-timeout": (True, None, "the scheduler waits until nodes and pods are listed, however long"),
    "disable-default-scheduler-config": (
        False,
        "true",
        "the scheduler never falls back to its built-in conf: a conf with errors stops start-up",
    ),
    "scheduler-sharding-mode": (True, None, "node sharding is not supported; every node is scheduled"),
    "scheduler-sharding-name": (True, None, "node sharding is not supported"),
    "feature-gates": (True, None, "Volcano's feature gates do not apply here"),
    "log-flush-frequency": (True, None, "log lines are written as they happen"),
    # klog's flags (Volcano registers them all)
    "alsologtostderr": (False, None, "logs always go to standard error"),
    "log-dir": (True, None, "logs always go to standard error"),
    "log-file": (True, None, "logs always go to standard error"),
    "log-file-max-size": (True, None, "logs always go to standard error"),
    "one-output": (False, None, "logs always go to standard error"),
    "skip-headers": (False, None, "the log format is fixed"),
    "skip-log-headers": (False, None, "the log format is fixed"),
    "add-dir-header": (False, None, "the log format is fixed"),
    "stderrthreshold": (True, None, "every log line goes to standard error"),
    "vmodule": (True, None, "verbosity is set for the whole process with -v"),
    "log-backtrace-at": (True, None, "not supported"),
    "legacy-stderr-threshold-behavior": (False, None, "every log line goes to standard error"),
}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class FlagError(ValueError):
    """A Volcano flag with a value Volcano would refuse; the message is pflag's."""


def go_bool(text: str) -> bool:
    """strconv.ParseBool, as pflag reads a boolean flag's value."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def go_duration(text: str) -> float:
    """A Go duration (`1s`, `500ms`, `1m30s`, `-2h`, `0`) in seconds, as time.ParseDuration reads it."""
    body = text[1:] if text[:1] in "+-" else text
    sign = -1.0 if text.startswith("-") else 1.0
    if body == "0":
        return 0.0
    parts = _DURATION.findall(body)
    if not body or "".join(number + unit for number, unit in parts) != body:
        raise ValueError(f'time: invalid duration "{text}"' + ("" if parts else " (missing unit?)"))
    return sign * sum(float(number) * _UNITS[unit] for number, unit in parts)


@dataclass
class Normalised:
    """Arguments ready for argparse, and what was set aside on the way (one line each)."""

    args: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def normalise(argv: Sequence[str], booleans: frozenset[str] = BOOLEANS) -> Normalised:
    """Rewrite pflag syntax for argparse (see the module docstring); raises FlagError on a bad boolean."""
    out = Normalised()
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            out.args.extend(tokens[i - 1 :])
            break
        if not token.startswith("--") or token == "--":
            out.args.append(token)
            continue
        name, has_value, value = token[2:].partition("=")
        name = name.replace("_", "-")
        if name in booleans:
            out.args.append(f"--{name}={'true' if _bool(name, value if has_value else 'true') else 'false'}")
        elif name in _IGNORED:
            takes_value, agrees, why = _IGNORED[name]
            if takes_value and not has_value and i < len(tokens):
                value, i = tokens[i], i + 1
            elif not takes_value:
                value = str(_bool(name, value if has_value else "true")).lower()
            if value != agrees:
                out.warnings.append(f"--{name}: accepted for Volcano compatibility, no effect here: {why}")
        else:
            out.args.append(f"--{name}" + (f"={value}" if has_value else ""))
    return out


def _bool(name: str, value: str) -> bool:
    try:
        return go_bool(value)
    except ValueError as exc:
        raise FlagError(f'invalid argument "{value}" for "--{name}" flag: {exc}') from exc


def ignored_flags() -> dict[str, str]:
    """Every flag accepted without effect, with why (for the docs and their test)."""
    return {name: why for name, (_, _, why) in _IGNORED.items()}


def check_client_flags(args: argparse.Namespace) -> str:
    """What is wrong with the API client and leader election flags the scheduler and the extender
    share, or ""."""
    if args.kube_api_qps < 0 or args.kube_api_burst < 1:
        return "--kube-api-qps must be 0 (no limit) or more and --kube-api-burst 1 or more"
    lease, renew, retry = (
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    )
    if not (lease > renew > 0 and retry > 0):  # client-go's ValidateLeaderElectionConfiguration
        return "--leader-elect-lease-duration must exceed --leader-elect-renew-deadline, all above 0"
    return ""

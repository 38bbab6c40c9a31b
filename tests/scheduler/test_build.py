"""`build_scheduler`: a `SchedulerConfig` becomes the server's options unchanged, and start-up's
failures come in start-up's order (every conf error, then the kubeconfig, then the assignment key),
each before anything is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtimekit.base.keyring import KeyRing, ensure_key_folder
from runtimekit.kube.http import KubeConfigError
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import (
    AssignmentKeys,
    ConfCheckFailed,
    Endpoints,
    KubeConnection,
    LeaderElection,
    SchedulerConfig,
    build_scheduler,
)
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.arguments import ArgumentError

P = KitProtocol.default()
NOWHERE = KubeConnection(master="http://127.0.0.1:9")  # never called: the schedulers here are not started
GPU_CONF = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n'
BAD_CONF = 'actions: "allocate, shufle"\ntiers:\n- plugins:\n  - name: nosuch\n'


def test_the_config_becomes_the_servers_options(tmp_path: Path) -> None:
    config = SchedulerConfig(
        kube=NOWHERE,
        conf=parse_conf(GPU_CONF),
        protocol=P,
        scheduler_names=("volcano", P.scheduler_name),
        keys=AssignmentKeys(ensure_key_folder(tmp_path / "keys")),
        leader_election=LeaderElection(True, "volcano-system", identity="a", renew_deadline=9.0),
        endpoints=Endpoints("localhost:0", "127.0.0.1:0"),
        default_queue="q",
        period=0.5,
        bind_workers=2,
    )
    scheduler = build_scheduler(config)
    scheduler.stop()
    options = scheduler.options
    assert scheduler.framework.action_names == ("allocate",)
    assert options.scheduler_names == (P.scheduler_name, "volcano")  # the protocol's first, each once
    assert (options.leader_elect, options.lease_namespace, options.lease_name) == (
        True,
        "volcano-system",
        P.scheduler_name,
    )
    assert (options.identity, options.lease_seconds, options.renew_deadline) == ("a", 15.0, 9.0)
    assert (options.healthz_address, options.metrics_address, options.default_queue) == (
        "localhost:0",
        "127.0.0.1:0",
        "q",
    )
    assert (options.period, options.bind_workers) == (0.5, 2)
    assert isinstance(options.signer, KeyRing)
    assert scheduler.watcher is None  # a conf in hand: no file to watch


def test_a_conf_file_is_watched_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.conf"
    path.write_text(GPU_CONF)
    for reload in (False, True):
        config = SchedulerConfig(kube=NOWHERE, conf=path, reload_conf=reload, keys=AssignmentKeys(required=False))
        scheduler = build_scheduler(config)
        scheduler.stop()
        assert scheduler.options.conf_path == str(path)
        assert (scheduler.watcher is not None) == reload


def test_every_conf_error_is_reported_before_connecting() -> None:
    config = SchedulerConfig(kube=KubeConnection(kubeconfig="/nonexistent/kubeconfig"), conf=parse_conf(BAD_CONF))
    with pytest.raises(ConfCheckFailed) as caught:
        build_scheduler(config)
    assert "unknown action 'shufle'" in str(caught.value)
    assert "unknown plugin 'nosuch'" in str(caught.value)


def test_a_missing_kubeconfig_is_reported_before_a_missing_key() -> None:
    config = SchedulerConfig(kube=KubeConnection(kubeconfig="/nonexistent/kubeconfig"), conf=parse_conf(GPU_CONF))
    with pytest.raises(KubeConfigError):
        build_scheduler(config)
    with pytest.raises(ArgumentError, match="--assignment-keys is required"):
        build_scheduler(SchedulerConfig(kube=NOWHERE, conf=parse_conf(GPU_CONF)))

"""The simulated backend: GPU specs, stable identities, plausible metrics, faults reported synchronously."""

from __future__ import annotations

import pytest

from runtimekit.model import GPU_MODELS, MigMode, simulated_uuid
from runtimekit.runtime.backend import EventKind, Fault, GpuLoad, HealthEvent
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("8xH200", [("H200", 8)]),
        ("4xA100-80GB,4xT4", [("A100-80GB", 4), ("T4", 4)]),
        (" 2 x A100 , 1XH100 ", [("A100-80GB", 2), ("H100-80GB", 1)]),
    ],
)
def test_parse_gpu_spec(text: str, groups: list[tuple[str, int]]) -> None:
    assert parse_gpu_spec(text) == groups


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("H200", "expected COUNTxMODEL"),
        ("0xH200", "at least 1"),
        ("2xB300", "unknown GPU model 'B300'"),
        ("2xH200,", "bad GPU group ''"),
    ],
)
def test_parse_gpu_spec_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_gpu_spec(text)


def test_devices_use_real_memory_sizes_and_stable_uuids() -> None:
    backend = SimulatedBackend("n1", parse_gpu_spec("2xA100-80GB,1xT4"))
    devices = backend.devices()
    assert [(d.index, d.model, d.memory_mib, d.minor) for d in devices] == [
        (0, "A100-80GB", GPU_MODELS["A100-80GB"].memory_mib, 0),
        (1, "A100-80GB", GPU_MODELS["A100-80GB"].memory_mib, 1),
        (2, "T4", GPU_MODELS["T4"].memory_mib, 2),
    ]
    assert [d.uuid for d in devices] == [simulated_uuid("n1", i) for i in range(3)]
    assert [d.uuid for d in SimulatedBackend("n1", [("A100-80GB", 3)]).devices()] == [d.uuid for d in devices]


def test_metrics_follow_the_granted_load_and_change() -> None:
    backend = SimulatedBackend("n1", [("H200", 2)], seed=3)
    uuid = backend.devices()[0].uuid
    load = {uuid: GpuLoad(900, 60_000)}
    samples = [backend.sample(load) for _ in range(30)]
    busy = [s[0] for s in samples[10:]]
    idle = [s[1] for s in samples[10:]]
    assert all(s.utilization_percent > 30 for s in busy)
    assert all(s.utilization_percent < 5 for s in idle)
    assert len({s.utilization_percent for s in busy}) > 5
    assert all(0 < s.memory_used_mib <= 60_000 for s in busy)
    assert all(s.memory_used_mib == 0 for s in idle)
    assert max(s.temperature_celsius for s in busy) > max(s.temperature_celsius for s in idle)
    assert all(0 < s.power_watts <= s.power_limit_watts * 1.01 for s in busy)


def test_clocks_follow_utilisation_and_energy_integrates_power() -> None:
    now = [1000.0]
    backend = SimulatedBackend("n1", [("H200", 2)], seed=3, clock=lambda: now[0])
    uuid = backend.devices()[0].uuid
    load = {uuid: GpuLoad(900, 60_000)}
    first = backend.sample(load)
    assert [s.energy_millijoules for s in first] == [0, 0]  # nothing drawn before the first sample
    now[0] += 10.0
    busy, idle = backend.sample(load)
    assert busy.energy_millijoules == int(busy.power_watts * 10.0 * 1000.0)
    assert idle.energy_millijoules == int(idle.power_watts * 10.0 * 1000.0)
    assert busy.sm_clock_mhz is not None
    assert idle.sm_clock_mhz is not None
    assert busy.sm_clock_mhz > idle.sm_clock_mhz >= 210
    assert (busy.memory_clock_mhz, busy.pcie_replays) == (3201.0, 0)
    assert busy.encoder_utilization_percent is None  # not simulated: no source, no value


def test_faults_are_reported_to_the_listener_at_once() -> None:
    events: list[HealthEvent] = []
    backend = SimulatedBackend("n1", [("T4", 2)], clock=lambda: 12.5)
    backend.start_events(events.append)
    backend.inject(Fault(EventKind.ECC, 1, uncorrectable=True, count=2))
    backend.inject(Fault(EventKind.LOST, 0))
    assert backend.sample({})[0].lost
    assert backend.sample({})[1].ecc_uncorrected == 2
    backend.inject(Fault(EventKind.BACK, 0))
    assert not backend.sample({})[0].lost
    assert [(e.kind, e.uuid, e.unix_ms) for e in events] == [
        (EventKind.ECC, simulated_uuid("n1", 1), 12500),
        (EventKind.LOST, simulated_uuid("n1", 0), 12500),
        (EventKind.BACK, simulated_uuid("n1", 0), 12500),
    ]


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault(EventKind.XID, 5, xid=79), "no GPU with index 5"),
        (Fault(EventKind.XID, 0, xid=0), "XID number above 0"),
        (Fault(EventKind.ECC, 0, count=0), "count of at least 1"),
    ],
    ids=["no-such-gpu", "xid-zero", "ecc-count-zero"],
)
def test_bad_faults_are_refused(fault: Fault, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SimulatedBackend("n1", [("T4", 1)]).inject(fault)


def test_mig_layouts() -> None:
    backend = SimulatedBackend("n1", [("A100-80GB", 2)], mig_layouts={1: ["1g.10gb", "3g.40gb"]})
    plain, mig = backend.devices()
    assert (plain.mig_mode, plain.mig_devices) == (MigMode.OFF, ())
    assert mig.mig_mode is MigMode.STATIC
    placed = [(m.profile, m.start, m.memory_mib) for m in mig.mig_devices]
    assert placed == [("3g.40gb", 0, 40192), ("1g.10gb", 4, 9728)]
    assert len({m.uuid for m in mig.mig_devices}) == 2
    assert all(m.uuid.startswith("MIG-") for m in mig.mig_devices)
    with pytest.raises(ValueError, match="GPU index 4"):
        SimulatedBackend("n1", [("A100-80GB", 2)], mig_layouts={4: ["1g.10gb"]})

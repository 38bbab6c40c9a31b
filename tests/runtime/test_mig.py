"""MIG on the node without the service: the placement rules, the --mig-mode/--mig-layout flags, and the
simulated backend's static layouts and dynamic devices (made, refused, destroyed, kept across restarts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtimekit.model import MigMode, simulated_uuid
from runtimekit.model.mig import geometry
from runtimekit.runtime.backend import MigError, MigFailure
from runtimekit.runtime.daemon import RuntimeOptions, build_backend
from runtimekit.runtime.mig import MigConfig, cap_paths, max_instances, parse_mig_config
from runtimekit.runtime.simulated import SimulatedBackend, mig_uuid

A100 = "A100-80GB"
GPU0 = simulated_uuid("n1", 0)


def dynamic_backend(state: Path | None = None, count: int = 1) -> SimulatedBackend:
    return SimulatedBackend("n1", [(A100, count)], mig_modes={0: MigMode.DYNAMIC}, state_file=state)


def layout(backend: SimulatedBackend, index: int = 0) -> list[tuple[str, int]]:
    return [(m.profile, m.start) for m in backend.devices()[index].mig_devices]


# -- placement rules -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("existing", "profile", "start", "failure", "message"),
    [
        pytest.param([], "1g.10gb", 6, None, "", id="valid-last-slice"),
        pytest.param([], "3g.40gb", 4, None, "", id="valid-3g-upper-half"),
        pytest.param([("3g.40gb", 0)], "4g.40gb", 0, MigFailure.CONFLICT, "overlap 3g.40gb", id="overlapping"),
        pytest.param([("1g.10gb", 5)], "2g.20gb", 4, MigFailure.CONFLICT, "slices 4-5", id="overlap-partly"),
        pytest.param([("3g.40gb", 0)], "3g.40gb", 4, None, "", id="beside-existing"),
        pytest.param([], "3g.40gb", 2, MigFailure.INVALID, "valid starts: 0, 4", id="wrong-start"),
        pytest.param([], "7g.80gb", 1, MigFailure.INVALID, "cannot start at slice 1", id="7g-not-at-0"),
        pytest.param([], "1g.18gb", 0, MigFailure.INVALID, "has no MIG profile '1g.18gb'", id="unknown-profile"),
    ],
)
def test_placement_rules_on_a_dynamic_a100(
    existing: list[tuple[str, int]], profile: str, start: int, failure: MigFailure | None, message: str
) -> None:
    backend = dynamic_backend()
    for name, at in existing:
        backend.create_mig_device(GPU0, name, at)
    if failure is None:
        made = backend.create_mig_device(GPU0, profile, start)
        assert (made.profile, made.start, made.dynamic) == (profile, start, True)
        assert made.uuid.startswith("MIG-")
        assert made.memory_mib == geometry(A100).profile(profile).memory_mib  # type: ignore[union-attr]
        return
    with pytest.raises(MigError) as refused:
        backend.create_mig_device(GPU0, profile, start)
    assert refused.value.failure is failure
    assert message in refused.value.message
    assert layout(backend) == existing  # nothing was made


@pytest.mark.parametrize("mode", [MigMode.OFF, MigMode.STATIC], ids=["off", "static"])
def test_only_dynamic_gpus_make_mig_devices(mode: MigMode) -> None:
    layouts = {0: ["7g.80gb"]} if mode is MigMode.STATIC else {}
    backend = SimulatedBackend("n1", [(A100, 1)], mig_modes={0: mode}, mig_layouts=layouts)
    with pytest.raises(MigError, match="not in dynamic MIG mode") as refused:
        backend.create_mig_device(GPU0, "1g.10gb", 0)
    assert refused.value.failure is MigFailure.CONFLICT
    if mode is MigMode.STATIC:
        static = backend.devices()[0].mig_devices[0]
        with pytest.raises(MigError, match="its MIG devices stay"):
            backend.destroy_mig_device(GPU0, static.uuid)


def test_dynamic_devices_fill_the_gpu_and_are_destroyed() -> None:
    backend = dynamic_backend()
    made = [backend.create_mig_device(GPU0, "1g.10gb", s) for s in range(7)]
    assert [m.gpu_instance_id for m in made] == [1, 2, 3, 4, 5, 6, 7]
    assert len({m.uuid for m in made}) == 7
    with pytest.raises(MigError, match="overlap"):
        backend.create_mig_device(GPU0, "1g.10gb", 0)
    backend.destroy_mig_device(GPU0, made[2].uuid)
    assert [s for _, s in layout(backend)] == [0, 1, 3, 4, 5, 6]
    again = backend.create_mig_device(GPU0, "1g.10gb", 2)
    assert again.gpu_instance_id == 3  # the lowest free instance id
    assert again.uuid != made[2].uuid  # but a new device
    with pytest.raises(MigError, match="no MIG device"):
        backend.destroy_mig_device(GPU0, made[2].uuid)


def test_a_busy_device_is_not_destroyed() -> None:
    backend = dynamic_backend()
    made = backend.create_mig_device(GPU0, "2g.20gb", 2)
    backend.set_busy(made.uuid)
    with pytest.raises(MigError) as busy:
        backend.destroy_mig_device(GPU0, made.uuid)
    assert busy.value.failure is MigFailure.IN_USE
    backend.set_busy(made.uuid, False)
    backend.destroy_mig_device(GPU0, made.uuid)
    assert layout(backend) == []


def test_dynamic_devices_outlive_the_backend_like_a_gpu(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    first = dynamic_backend(state)
    made = first.create_mig_device(GPU0, "3g.40gb", 4)
    second = dynamic_backend(state)
    assert second.devices()[0].mig_devices == (made,)
    newer = second.create_mig_device(GPU0, "3g.40gb", 0)
    assert newer.uuid != made.uuid  # the serial carries on: no UUID is reused
    off = SimulatedBackend("n1", [(A100, 1)], state_file=state)  # no longer dynamic: nothing comes back
    assert off.devices()[0].mig_devices == ()


def test_static_layouts_get_valid_starts_and_stable_uuids() -> None:
    backend = SimulatedBackend("n1", [(A100, 2)], mig_layouts={1: ["1g.10gb", "3g.40gb", "1g.10gb", "2g.20gb"]})
    # 3g.40gb first at 0 leaves no start for the second 1g.10gb (1g starts end at 6): the search backs off
    assert layout(backend, 1) == [("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4)]
    gpu1 = backend.devices()[1]
    assert {m.uuid for m in gpu1.mig_devices} == {
        mig_uuid(gpu1.uuid, m.start, m.profile) for m in gpu1.mig_devices
    }  # the same UUIDs on every start
    assert all(not m.dynamic for m in gpu1.mig_devices)
    assert gpu1.mig_devices[0].cap_paths == cap_paths(1, gpu1.mig_devices[0].gpu_instance_id, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"mig_modes": {0: MigMode.DYNAMIC}}, "T4, which has no MIG", id="mig-on-t4"),
        pytest.param(
            {"mig_modes": {1: MigMode.STATIC}}, "static MIG mode but has no MIG layout", id="static-no-layout"
        ),
        pytest.param(
            {"mig_modes": {1: MigMode.DYNAMIC}, "mig_layouts": {1: ["7g.80gb"]}},
            "has a MIG layout, but its MIG mode is dynamic",
            id="layout-on-dynamic",
        ),
        pytest.param({"mig_layouts": {1: ["7g.80gb", "1g.10gb"]}}, "more compute slices", id="layout-too-big"),
        pytest.param({"mig_layouts": {1: ["3g.40gb", "3g.40gb", "1g.10gb"]}}, "does not fit", id="layout-overlaps"),
        pytest.param({"mig_layouts": {1: ["1g.18gb"]}}, "no MIG profile '1g.18gb'", id="layout-unknown-profile"),
        pytest.param({"mig_modes": {5: MigMode.DYNAMIC}}, "GPU index 5", id="no-such-gpu"),
    ],
)
def test_bad_mig_setups_stop_the_backend(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SimulatedBackend("n1", [("T4", 1), (A100, 1)], **kwargs)  # type: ignore[arg-type]


def test_max_instances_and_cap_paths() -> None:
    geo = geometry(A100)
    assert geo is not None
    assert {p.name: max_instances(geo, p) for p in geo.profiles} == {
        "1g.10gb": 7,
        "1g.20gb": 4,
        "2g.20gb": 3,
        "3g.40gb": 2,
        "4g.40gb": 1,
        "7g.80gb": 1,
    }
    # /proc/driver/nvidia-caps/mig-minors: gpu0/gi0/access 3, gpu0/gi0/ci0/access 4, gpu31/gi14/ci7/access 4322
    assert cap_paths(0, 0, 0) == ("/dev/nvidia-caps/nvidia-cap3", "/dev/nvidia-caps/nvidia-cap4")
    assert cap_paths(31, 14, 7)[1] == "/dev/nvidia-caps/nvidia-cap4322"


# -- flags ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "layout_text", "count", "modes", "layouts"),
    [
        pytest.param("", "", 2, [MigMode.OFF] * 2, {}, id="nothing"),
        pytest.param("dynamic", "", 2, [MigMode.DYNAMIC] * 2, {}, id="all-dynamic"),
        pytest.param("0:dynamic,1:static", "7g.80gb", 3, ["dynamic", "static", "off"], {1: ("7g.80gb",)}, id="mixed"),
        pytest.param("dynamic,0:off", "", 2, ["off", "dynamic"], {}, id="default-and-override"),
        pytest.param("", "3g.40gb,2g.20gb,1g.10gb,1g.10gb", 2, ["static"] * 2, None, id="layout-means-static"),
        pytest.param(
            "", "0:3g.40gb,3g.40gb;1:7g.80gb", 3, ["static", "static", "off"], {0: ("3g.40gb",) * 2, 1: ("7g.80gb",)},
            id="per-gpu-layouts",
        ),
        pytest.param(
            "dynamic", "2:1g.10gb", 3, ["dynamic", "dynamic", "static"], {2: ("1g.10gb",)}, id="own-layout-is-static"
        ),
    ],
)  # fmt: skip
def test_mig_flags(
    mode: str, layout_text: str, count: int, modes: list[str], layouts: dict[int, tuple[str, ...]] | None
) -> None:
    got_modes, got_layouts = parse_mig_config(mode, layout_text).expand(count)
    assert [m.value for m in got_modes.values()] == [MigMode(m).value for m in modes]
    if layouts is not None:
        assert got_layouts == layouts
    else:
        assert set(got_layouts) == set(range(count))


@pytest.mark.parametrize(
    ("mode", "layout_text", "count", "message"),
    [
        pytest.param("dynamc", "", 1, "bad mode 'dynamc'", id="typo"),
        pytest.param("static,dynamic", "", 1, "more than one entry without a GPU index", id="two-defaults"),
        pytest.param("0:static,0:dynamic", "", 1, "GPU 0 is named twice", id="twice"),
        pytest.param("3:dynamic", "", 2, "--mig-mode names GPU 3", id="index-beyond"),
        pytest.param("static", "", 1, "no layout", id="static-without-layout"),
        pytest.param("0:off", "0:7g.80gb", 1, "its MIG mode is off", id="layout-on-off"),
        pytest.param("", "0:", 1, "an empty layout", id="empty-layout"),
    ],
)
def test_bad_mig_flags(mode: str, layout_text: str, count: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_mig_config(mode, layout_text).expand(count)


def test_nvml_refuses_a_layout_and_the_simulated_backend_takes_the_flags(tmp_path: Path) -> None:
    options = RuntimeOptions("nvml", "s", tmp_path, "n1", mig_layout="7g.80gb")
    with pytest.raises(ValueError, match="--mig-layout is for the simulated backend"):
        build_backend(options)
    simulated = RuntimeOptions(
        "simulated",
        "s",
        tmp_path,
        "n1",
        simulate_gpus="3xA100-80GB",
        mig_mode="0:dynamic,1:static",
        mig_layout="1:3g.40gb,3g.40gb",
    )
    backend, _, _ = build_backend(simulated)
    assert [d.mig_mode for d in backend.devices()] == [MigMode.DYNAMIC, MigMode.STATIC, MigMode.OFF]
    assert MigConfig().mode(0) is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--mig-mode", "sometimes"], "bad mode 'sometimes'", id="bad-mode"),
        pytest.param(["--mig-mode", "0:dynamic", "--simulate-gpus", "1xT4"], "has no MIG", id="mig-on-t4"),
        pytest.param(["--mig-layout", "7g.80gb,1g.10gb"], "more compute slices", id="layout-too-big"),
    ],
)
def test_runtime_command_refuses_bad_mig_flags(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, flags: list[str], message: str
) -> None:
    from runtimekit.cli.main import main

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    argv = ["runtime", "--backend", "simulated", "--simulate-gpus", "2xA100-80GB", "--socket", str(tmp_path / "s")]
    argv += ["--state-dir", str(tmp_path), "--pod-resources-socket", "", *flags]
    assert main(argv) == 2
    assert message in caplog.text

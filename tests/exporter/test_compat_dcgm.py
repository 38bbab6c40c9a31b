"""dcgm-exporter's names (`--metrics-compat dcgm`): the families, types and help strings of its default
counters file (tests/data/peers/dcgm-exporter-default-counters.csv, NVIDIA/dcgm-exporter's
etc/default-counters.csv as data), its labels, one copy per container on a shared GPU as its Kubernetes
mapping makes, and families without a source left out, never zero."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from exporter.conftest import Node
from exporter.test_metrics import allocate
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.exporter.collector import RuntimeCollector
from runtimekit.exporter.compat_dcgm import DCGM_LABELS, FAMILIES, OMITTED, dcgm_families
from runtimekit.exporter.exposition import Exposition
from runtimekit.exporter.sample import GpuReading, Sample, read_sample
from runtimekit.protocol import KitProtocol

COUNTERS = Path(__file__).resolve().parents[1] / "data" / "peers" / "dcgm-exporter-default-counters.csv"


def counters_file() -> dict[str, tuple[str, str]]:
    """The file's uncommented DCGM fields: name -> (type, help), as dcgm-exporter reads it."""
    found = {}
    for row in csv.reader(line for line in COUNTERS.read_text().splitlines() if line and not line.startswith("#")):
        name, kind, doc = (cell.strip() for cell in row[:3])
        found[name] = (kind, doc)
    return found


def scrape(node: Node, compat: tuple[str, ...]) -> str:
    client = RuntimeClient(node.socket, timeout_s=2.0)
    registry = CollectorRegistry()
    registry.register(RuntimeCollector(client, KitProtocol.default(), "node-a", compat=compat))
    try:
        return Exposition(registry).render().decode()
    finally:
        client.close()


@pytest.fixture
def shared(node: Node) -> Node:
    """Two containers sharing GPU 0, GPU 1 free."""
    gpu = node.client.list_devices()[0].uuid
    allocate(node.client, "a", gpu, 300, 8192)
    allocate(node.client, "b", gpu, 200, 4096)
    return node


def test_every_family_is_the_counters_files_with_its_type_and_help(shared: Node) -> None:
    expected = counters_file()
    families = {f.name: f for f in text_string_to_metric_families(scrape(shared, ("dcgm",)))}
    written = {name for name in families if name.startswith("DCGM_")}
    # the simulated GPUs give every reading but the video engines' and the driver's reservation
    unsimulated = {"DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_FB_RESERVED"}
    assert written == {name for name, *_ in FAMILIES} - unsimulated
    for name, kind, doc, _ in FAMILIES:
        assert (kind, doc) == expected[name], name
        if name in written:
            assert (families[name].type, families[name].documentation) == expected[name], name
    # each DCGM field of the file is written, or left out with a reason the docs give
    fields = {name for name, (kind, _) in expected.items() if kind != "label"}
    assert fields == {name for name, *_ in FAMILIES} | set(OMITTED)
    assert not {name for name, *_ in FAMILIES} & set(OMITTED)
    # and its label fields are labels of every family
    assert {name for name, (kind, _) in expected.items() if kind == "label"} <= set(DCGM_LABELS)


def test_counters_keep_dcgm_exporters_names(shared: Node) -> None:
    text = scrape(shared, ("dcgm",))
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n" in text
    assert "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter\n" in text
    assert "_total" not in "".join(line for line in text.splitlines(keepends=True) if line.startswith("DCGM_"))


def test_labels_and_one_copy_per_container_on_a_shared_gpu(shared: Node) -> None:
    gpus = shared.client.list_devices()
    found = {
        (s.labels["gpu"], s.labels["pod"]): s
        for f in text_string_to_metric_families(scrape(shared, ("dcgm",)))
        if f.name == "DCGM_FI_DEV_GPU_UTIL"
        for s in f.samples
    }
    assert set(found) == {("0", "a"), ("0", "b"), ("1", "")}
    assert found["0", "a"].labels == {
        "gpu": "0",
        "UUID": gpus[0].uuid,
        "device": "nvidia0",
        "modelName": "NVIDIA H200",
        "Hostname": "node-a",
        "container": "main",
        "namespace": "default",
        "pod": "a",
        "GPU_I_PROFILE": "",  # not a MIG device
        "GPU_I_ID": "",
        "DCGM_FI_DRIVER_VERSION": "",  # a simulated GPU has no driver
    }
    assert set(found["1", ""].labels) == set(DCGM_LABELS)
    assert (found["1", ""].labels["namespace"], found["1", ""].labels["container"]) == ("", "")
    assert found["0", "a"].value == found["0", "b"].value  # the device's reading, copied per container


def test_values_are_the_runtimes_readings_in_dcgms_units(shared: Node) -> None:
    client = RuntimeClient(shared.socket, timeout_s=2.0)
    sample = read_sample(client, "node-a")
    client.close()
    values = {
        (f.name, s.labels["gpu"]): s.value
        for f in dcgm_families(sample)
        for s in f.samples
        if s.labels["pod"] in ("", "a")
    }
    gpu = sample.gpus[0]
    assert gpu.memory_used_bytes is not None
    assert gpu.memory_total_bytes is not None
    assert gpu.utilization is not None
    mib = 1024 * 1024
    assert values["DCGM_FI_DEV_FB_USED", "0"] == gpu.memory_used_bytes / mib
    assert values["DCGM_FI_DEV_FB_FREE", "0"] == (gpu.memory_total_bytes - gpu.memory_used_bytes) / mib
    assert values["DCGM_FI_DEV_GPU_UTIL", "0"] == pytest.approx(gpu.utilization * 100)
    assert values["DCGM_FI_DEV_SM_CLOCK", "0"] == gpu.sm_clock_mhz
    assert values["DCGM_FI_DEV_XID_ERRORS", "0"] == 0  # no XID yet


def _reading(**changes: Any) -> GpuReading:
    base = GpuReading(0, "GPU-x", "T4", 0.5, 0.2, 1.0, 2.0, 40.0, 30.0, 70.0, 0, 0, 0, (), True, "", "off")
    return replace(base, **changes)


def test_a_reading_without_a_source_leaves_its_family_out() -> None:
    bare = {f.name for f in dcgm_families(Sample("n", (_reading(),)))}
    assert "DCGM_FI_DEV_SM_CLOCK" not in bare
    assert "DCGM_FI_DEV_ENC_UTIL" not in bare
    assert "DCGM_FI_DEV_GPU_UTIL" in bare
    unread = {f.name for f in dcgm_families(Sample("n", (_reading(utilization=None, power_watts=None),)))}
    assert "DCGM_FI_DEV_GPU_UTIL" not in unread
    assert "DCGM_FI_DEV_POWER_USAGE" not in unread
    full = {f.name for f in dcgm_families(Sample("n", (_reading(sm_clock_mhz=1590.0, encoder_utilization=0.1),)))}
    assert {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_ENC_UTIL"} <= full


def test_free_memory_leaves_out_the_drivers_reservation_where_the_runtime_reads_it() -> None:
    """As DCGM and nvidia-smi count it: free = total - used - reserved (used already leaves it out)."""
    mib = 1024.0 * 1024.0
    reading = _reading(memory_total_bytes=8188 * mib, memory_used_bytes=2026 * mib, memory_reserved_bytes=390 * mib)
    values = {f.name: f.samples[0].value for f in dcgm_families(Sample("n", (reading,)))}
    assert (values["DCGM_FI_DEV_FB_USED"], values["DCGM_FI_DEV_FB_FREE"]) == (2026, 5772)
    assert values["DCGM_FI_DEV_FB_RESERVED"] == 390
    unknown = {f.name: f for f in dcgm_families(Sample("n", (replace(reading, memory_reserved_bytes=None),)))}
    assert "DCGM_FI_DEV_FB_RESERVED" not in unknown  # an old driver: no such figure, not zero
    assert unknown["DCGM_FI_DEV_FB_FREE"].samples[0].value == 8188 - 2026


def test_the_driver_version_and_product_name_label_the_series_where_nvml_gives_them() -> None:
    reading = _reading(product="Tesla T4", driver_version="550.54.15")
    (family, *_) = dcgm_families(Sample("n", (reading,)))
    (sample,) = family.samples
    assert (sample.labels["modelName"], sample.labels["DCGM_FI_DRIVER_VERSION"]) == ("Tesla T4", "550.54.15")


def test_off_by_default(shared: Node) -> None:
    assert "DCGM_" not in scrape(shared, ())

from __future__ import annotations

from pathlib import Path

import pytest

from runtimekit.cli.main import main
from runtimekit.protocol import (
    DEFAULTS,
    Protocol,
    ProtocolError,
    compare_protocols,
    load_protocol,
    loader,
    parse_protocol_text,
)
from runtimekit.protocol.loader import load_protocol_sources


def test_empty_file_is_the_default_protocol() -> None:
    protocol = parse_protocol_text("")
    assert protocol.values == DEFAULTS
    assert protocol.resources.gpu == "aliyun.com/gpu"
    assert protocol.memory_unit_mib == 1024
    assert protocol.fingerprint == Protocol.default().fingerprint


def test_dotted_and_nested_keys_mean_the_same() -> None:
    dotted = parse_protocol_text("resources.gpu: example.com/gpu\nmemoryUnit: 256Mi\n")
    nested = parse_protocol_text("resources:\n  gpu: example.com/gpu\nmemoryUnit: 256Mi\n")
    assert dotted.values == nested.values
    assert dotted.resources.gpu == "example.com/gpu"
    assert dotted.memory_unit_mib == 256
    assert dotted.fingerprint != Protocol.default().fingerprint


@pytest.mark.parametrize(
    ("text", "named"),
    [
        pytest.param("resources.gpuu: a.com/gpu\n", "resources.gpuu", id="unknown-key"),
        pytest.param("resources.gpu: gpu\n", "resources.gpu", id="unprefixed-resource"),
        pytest.param("resources.core: kubernetes.io/core\n", "resources.core", id="reserved-domain"),
        pytest.param("memoryUnit: 1G\n", "memoryUnit", id="unit-not-whole-mib"),
        pytest.param("memoryUnit: -1Gi\n", "memoryUnit", id="negative-unit"),
        pytest.param("schedulerName: Bad_Name\n", "schedulerName", id="bad-scheduler-name"),
        pytest.param("labels.enable: 'a b'\n", "labels.enable", id="bad-label-key"),
        pytest.param("sockets.runtime: relative.sock\n", "sockets.runtime", id="relative-socket"),
        pytest.param("annotations.assignment: 5\n", "annotations.assignment", id="not-a-string"),
    ],
)
def test_bad_values_are_rejected_naming_the_key(text: str, named: str) -> None:
    with pytest.raises(ProtocolError, match=named.replace(".", r"\.")):
        parse_protocol_text(text, "p.yaml")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("resources.migPrefix: a.com/mig-\n", id="camel"),
        pytest.param("resources.mig_prefix: a.com/mig-\n", id="snake"),
        pytest.param("resources:\n  mig-prefix: a.com/mig-\n", id="kebab-nested"),
    ],
)
def test_keys_follow_the_kits_one_spelling_rule(text: str) -> None:
    protocol = parse_protocol_text(text)
    assert protocol.resources.mig_prefix == "a.com/mig-"
    assert protocol.values["resources.migPrefix"] == "a.com/mig-"
    assert protocol.fingerprint == parse_protocol_text("resources.migPrefix: a.com/mig-\n").fingerprint


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "resources.gpu: a.com/g\nresources:\n  gpu: b.com/g\n", "'resources.gpu' is given twice", id="both"
        ),
        pytest.param("memoryUnit: 1Gi\nmemory_unit: 2Gi\n", "'memory_unit' is given twice", id="two-spellings"),
        pytest.param("resources: 5\n", "resources must be a mapping", id="group-not-mapping"),
        pytest.param("5: x\n", "key 5 is not a string", id="number-key"),
    ],
)
def test_keys_given_twice_or_malformed_are_refused(text: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse_protocol_text(text, "p.yaml")


def test_every_key_has_a_check() -> None:
    assert set(loader._CHECKS) == set(DEFAULTS)


def test_malformed_yaml_is_a_clear_error() -> None:
    with pytest.raises(ProtocolError, match=r"p\.yaml: not valid YAML"):
        parse_protocol_text("a: [unclosed\n", "p.yaml")
    with pytest.raises(ProtocolError, match="expected a mapping"):
        parse_protocol_text("- a\n- b\n", "p.yaml")


def _configmap(name: str, body: str) -> str:
    indented = "".join(f"    {line}\n" for line in body.splitlines())
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: kube-system\n"
        f"data:\n  protocol.yaml: |\n{indented}"
    )


def test_configmaps_and_plain_files_compare(tmp_path: Path) -> None:
    plain = tmp_path / "protocol.yaml"
    plain.write_text("schedulerName: lj-runtimekit-scheduler\n")
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(_configmap("a", "memoryUnit: 1Gi") + "---\n" + _configmap("b", "memoryUnit: 512Mi"))
    found = load_protocol_sources(plain) + load_protocol_sources(manifest)
    assert [label.rsplit(":", 1)[-1] for label, _ in found] == [
        str(plain).rsplit(":", 1)[-1],
        "kube-system/a",
        "kube-system/b",
    ]
    diffs = compare_protocols(found)
    assert [d.key for d in diffs] == ["memoryUnit"]


def test_manifest_without_protocol_configmap_is_an_error(tmp_path: Path) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {other: y}\n")
    with pytest.raises(ProtocolError, match=r"no ConfigMap with a 'protocol\.yaml' key"):
        load_protocol_sources(manifest)


def test_cli_show_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    custom = tmp_path / "custom.yaml"
    custom.write_text("resources.gpu: example.com/gpu\n")
    assert main(["protocol", "show", str(custom)]) == 0
    out = capsys.readouterr().out
    assert "resources.gpu: example.com/gpu" in out
    assert f"fingerprint: {load_protocol(custom).fingerprint}" in out

    same = tmp_path / "same.yaml"
    same.write_text("resources:\n  gpu: example.com/gpu\n")
    assert main(["protocol", "check", str(custom), str(same)]) == 0

    other = tmp_path / "other.yaml"
    other.write_text("resources.gpu: example.com/gpu\nmemoryUnit: 2Gi\nschedulerName: other\n")
    assert main(["protocol", "check", str(custom), str(other)]) == 1
    err = capsys.readouterr().err
    assert "differs: memoryUnit" in err
    assert "differs: schedulerName" in err
    assert "resources.gpu" not in err

    broken = tmp_path / "broken.yaml"
    broken.write_text("nope: 1\n")
    assert main(["protocol", "check", str(custom), str(broken)]) == 2
    assert "unknown key 'nope'" in capsys.readouterr().err

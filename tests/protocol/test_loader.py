from __future__ import annotations

from pathlib import Path

import pytest

from runtimekit.cli.main import main
from runtimekit.protocol import (
    DEFAULTS,
    KitProtocol,
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
    assert protocol.fingerprint == KitProtocol.default().fingerprint


def test_dotted_and_nested_keys_mean_the_same() -> None:
    dotted = parse_protocol_text("resources.gpu: example.com/gpu\nmemoryUnit: 256Mi\n")
    nested = parse_protocol_text("resources:\n  gpu: example.com/gpu\nmemoryUnit: 256Mi\n")
    assert dotted.values == nested.values
    assert dotted.resources.gpu == "example.com/gpu"
    assert dotted.memory_unit_mib == 256
    assert dotted.fingerprint != KitProtocol.default().fingerprint


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


# -- version 2: what the presets need ---------------------------------------------------------------
def test_a_file_newer_than_this_component_is_refused_saying_so() -> None:
    newer = loader.PROTOCOL_VERSION + 1
    with pytest.raises(ProtocolError, match=f"written for protocol version {newer}, but this runtimekit understands"):
        parse_protocol_text(f"version: {newer}\nresources.gpu: a.com/gpu\nresources.someday: x\n", "p.yaml")


@pytest.mark.parametrize("text", ["version: 0\n", "version: two\n", "version: true\n", "version: 1.5\n"])
def test_a_version_must_be_a_whole_number_from_one(text: str) -> None:
    with pytest.raises(ProtocolError, match="key 'version' must be a whole number from 1"):
        parse_protocol_text(text, "p.yaml")


def test_the_version_is_read_but_is_no_name() -> None:
    old = parse_protocol_text("resources.gpu: a.com/gpu\n")
    new = parse_protocol_text(f"version: {loader.PROTOCOL_VERSION}\nresources.gpu: a.com/gpu\n")
    assert (old.version, new.version) == (1, loader.PROTOCOL_VERSION)
    assert old == new
    assert old.fingerprint == new.fingerprint
    assert "version" not in new.values
    assert parse_protocol_text(new.to_yaml()).version == loader.PROTOCOL_VERSION


def test_keys_added_later_count_in_the_fingerprint_only_when_they_differ_from_their_defaults() -> None:
    plain = parse_protocol_text("")
    spelled_out = parse_protocol_text("resources.memoryPercent: ''\naliases.gpu: ''\nrules.modelMatch: exact\n")
    assert plain.fingerprint == spelled_out.fingerprint
    assert parse_protocol_text("rules.modelMatch: contains\n").fingerprint != plain.fingerprint
    # the version-1 keys alone decide the default fingerprint: what a version-1 component computes
    import hashlib
    import json

    version_one = {k: v for k, v in DEFAULTS.items() if k not in loader.ADDED_KEYS}
    digest = hashlib.sha256(json.dumps(dict(sorted(version_one.items())), separators=(",", ":")).encode())
    assert plain.fingerprint == digest.hexdigest()[:12]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("aliases:\n  memory: [v.sh/gpu-memory, w.sh/mem]\n", id="yaml-list"),
        pytest.param("aliases.memory: 'v.sh/gpu-memory, w.sh/mem'\n", id="comma-separated"),
    ],
)
def test_a_resource_may_have_several_names(text: str) -> None:
    protocol = parse_protocol_text(text)
    assert protocol.names("memory") == ("aliyun.com/gpu-memory", "v.sh/gpu-memory", "w.sh/mem")
    assert protocol.values["aliases.memory"] == "v.sh/gpu-memory,w.sh/mem"
    assert protocol.manages("w.sh/mem")
    assert not protocol.manages("w.sh/other")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("aliases.gpu: aliyun.com/gpu-memory\n", "names 'aliyun.com/gpu-memory', which", id="two-kinds"),
        pytest.param("aliases.memoryPercent: a.com/pct\n", "needs resources.memoryPercent", id="alias-of-nothing"),
        pytest.param("aliases.core: [a.com/ok, bad]\n", "aliases.core", id="bad-alias"),
        pytest.param("aliases.core: [a.com/ok, 5]\n", "must be a list of names", id="list-of-non-names"),
        pytest.param("resources.gpuReplicas: 0\n", "resources.gpuReplicas", id="no-replicas"),
        pytest.param("resources.gpuReplicas: 1000\n", "resources.gpuReplicas", id="too-many-replicas"),
        pytest.param("resources.memoryAdvertised: maybe\n", "resources.memoryAdvertised", id="not-a-switch"),
        pytest.param("rules.memoryDefault: half\n", "one of proportional, whole", id="unknown-memory-rule"),
        pytest.param("schedulerAliases: [ok, Not_OK]\n", "schedulerAliases", id="bad-scheduler-alias"),
        pytest.param("resources.gpu: [a.com/x, b.com/y]\n", "resources.gpu", id="list-for-one-name"),
    ],
)
def test_bad_version_two_values_are_refused_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message.replace(".", r"\.").replace("[", r"\[")):
        parse_protocol_text(text, "p.yaml")


def test_unset_version_two_names_are_empty_and_the_defaults_keep_version_one_behaviour() -> None:
    protocol = KitProtocol.default()
    assert protocol.names("memoryPercent") == ()
    assert protocol.resources.gpu_replicas == 1
    assert protocol.resources.memory_advertised
    assert (protocol.rules.memory_default, protocol.rules.model_match) == ("proportional", "exact")
    assert protocol.scheduler_aliases == ()


def test_check_compares_version_two_keys_and_show_prints_the_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("version: 2\nschedulerAliases: [hami-scheduler]\nresources.gpuReplicas: 10\n")
    b = tmp_path / "b.yaml"
    b.write_text("schedulerAliases: volcano\n")
    assert main(["protocol", "check", str(a), str(b)]) == 1
    err = capsys.readouterr().err
    assert "differs: schedulerAliases" in err
    assert "differs: resources.gpuReplicas" in err
    assert main(["protocol", "show", str(a)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"version: {loader.PROTOCOL_VERSION}\n")
    assert "resources.gpuReplicas: 10\n" in out
    assert "schedulerAliases: hami-scheduler\n" in out

"""The embedded API server serves resource.k8s.io v1, v1beta2 and v1beta1 (Dynamic Resource Allocation)
as kube-apiserver does: one storage, v1beta1's flat request fields and `basic` devices converted to
and from v1's `exactly` and flat devices (kube's pkg/apis/resource/v1beta1 conversion), decoding
against the shipped schemas, kube's printer columns, the slice field selectors. Real kubectl and
plain HTTP against the in-process server."""

from __future__ import annotations

import json

import httpx2

from fixtures.apiserver import Kubectl

CLAIMS = "/apis/resource.k8s.io/{}/namespaces/default/resourceclaims"
SLICES = "/apis/resource.k8s.io/{}/resourceslices"

V1BETA1_CLAIM = {
    "apiVersion": "resource.k8s.io/v1beta1",
    "kind": "ResourceClaim",
    "metadata": {"name": "two-gpus"},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "deviceClassName": "gpu.example.com",
                    "allocationMode": "ExactCount",
                    "count": 2,
                    "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
                },
                {
                    "name": "any",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.example.com"},
                        {"name": "small", "deviceClassName": "gpu.example.com", "count": 2},
                    ],
                },
            ]
        }
    },
}
V1_SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "n1-gpu"},
    "spec": {
        "driver": "gpu.example.com",
        "nodeName": "n1",
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {"model": {"string": "H200"}},
                "capacity": {"memory": {"value": "141Gi"}},
                "allowMultipleAllocations": True,
            }
        ],
    },
}


def test_v1beta1_requests_are_stored_and_served_as_v1_exactly(kube_http: httpx2.Client) -> None:
    assert kube_http.post(CLAIMS.format("v1beta1"), json=V1BETA1_CLAIM).status_code == 201
    v1 = kube_http.get(CLAIMS.format("v1") + "/two-gpus").json()
    assert v1["apiVersion"] == "resource.k8s.io/v1"
    gpu, alternatives = v1["spec"]["devices"]["requests"]
    assert gpu == {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.example.com",
            "allocationMode": "ExactCount",
            "count": 2,
            "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        },
    }
    assert "exactly" not in alternatives
    assert [a["name"] for a in alternatives["firstAvailable"]] == ["big", "small"]
    # read back through v1beta1 and v1beta2: the form each version writes
    back = kube_http.get(CLAIMS.format("v1beta1") + "/two-gpus").json()
    assert back["spec"]["devices"]["requests"][0]["count"] == 2
    assert "exactly" not in back["spec"]["devices"]["requests"][0]
    beta2 = kube_http.get(CLAIMS.format("v1beta2") + "/two-gpus").json()
    assert beta2["apiVersion"] == "resource.k8s.io/v1beta2"
    assert beta2["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2


def test_v1_devices_are_served_under_basic_in_v1beta1(kube_http: httpx2.Client) -> None:
    assert kube_http.post(SLICES.format("v1"), json=V1_SLICE).status_code == 201
    device = kube_http.get(SLICES.format("v1beta1") + "/n1-gpu").json()["spec"]["devices"][0]
    assert device["name"] == "gpu-0"
    assert device["basic"]["attributes"] == {"model": {"string": "H200"}}
    assert device["basic"]["capacity"] == {"memory": {"value": "141Gi"}}
    # a slice written as v1beta1 is stored flat
    beta1 = {**V1_SLICE, "apiVersion": "resource.k8s.io/v1beta1", "metadata": {"name": "n2-gpu"}}
    beta1["spec"] = {
        **V1_SLICE["spec"],
        "devices": [{"name": "gpu-0", "basic": {"attributes": {"uuid": {"string": "GPU-1"}}}}],
    }
    assert kube_http.post(SLICES.format("v1beta1"), json=beta1).status_code == 201
    stored = kube_http.get(SLICES.format("v1") + "/n2-gpu").json()["spec"]["devices"][0]
    assert stored == {"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-1"}}}


def test_claims_are_decoded_against_the_v1_schema(kube_http: httpx2.Client) -> None:
    bad = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "bad"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x", "count": "two"}}]}},
    }
    answer = kube_http.post(CLAIMS.format("v1"), json=bad)
    assert answer.status_code == 400
    assert "ExactDeviceRequest" in answer.json()["message"]


def test_kubectl_columns_and_slice_field_selector(kube_http: httpx2.Client, kubectl: Kubectl) -> None:
    assert kube_http.post(CLAIMS.format("v1beta1"), json=V1BETA1_CLAIM).status_code == 201
    assert kube_http.post(SLICES.format("v1"), json=V1_SLICE).status_code == 201
    claims = kubectl("get", "resourceclaims").stdout.split()
    assert claims[:5] == ["NAME", "STATE", "AGE", "two-gpus", "pending"]
    slices = kubectl("get", "resourceslices", "--field-selector", "spec.nodeName=n1").stdout.split()
    assert slices[:9] == ["NAME", "NODE", "DRIVER", "POOL", "AGE", "n1-gpu", "n1", "gpu.example.com", "n1"]
    none = kubectl("get", "resourceslices", "--field-selector", "spec.driver=other", "-o", "name").stdout
    assert none == ""
    resources = kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split()
    assert resources == [
        "deviceclasses.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "resourceslices.resource.k8s.io",
    ]


def claim_with(request: dict[str, object], name: str = "bad") -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def test_selectors_that_do_not_compile_are_refused(kube_http: httpx2.Client, kubectl: Kubectl) -> None:
    bad = {
        "name": "gpu",
        "exactly": {"deviceClassName": "x", "selectors": [{"cel": {"expression": "device.driver == "}}]},
    }
    answer = kube_http.post(CLAIMS.format("v1"), json=claim_with(bad))
    assert answer.status_code == 422
    [cause] = answer.json()["details"]["causes"]
    assert cause["field"] == "spec.devices.requests[0].exactly.selectors[0].cel.expression"
    assert "compilation failed" in cause["message"]
    undeclared = {
        "name": "gpu",
        "exactly": {"deviceClassName": "x", "selectors": [{"cel": {"expression": "gpu.x == 1"}}]},
    }
    assert "undeclared reference to 'gpu'" in kube_http.post(CLAIMS.format("v1"), json=claim_with(undeclared)).text
    # through a template and a DeviceClass too, and kubectl prints the reason
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {"spec": {"devices": {"requests": [bad]}}},
    }
    done = kubectl("apply", "-f", "-", stdin=json.dumps(template), check=False)
    assert done.returncode != 0
    assert "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression" in done.stderr
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "c"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]},
    }
    assert (
        kube_http.post(SLICES.format("v1").replace("resourceslices", "deviceclasses"), json=device_class).status_code
        == 422
    )


def test_request_shape_rules(kube_http: httpx2.Client) -> None:
    both = {
        "name": "gpu",
        "exactly": {"deviceClassName": "x"},
        "firstAvailable": [{"name": "a", "deviceClassName": "x"}],
    }
    no_class = {"name": "gpu", "exactly": {}}
    all_with_count = {"name": "gpu", "exactly": {"deviceClassName": "x", "allocationMode": "All", "count": 2}}
    for request, field in (
        (both, "spec.devices.requests[0]"),
        (no_class, "spec.devices.requests[0].exactly.deviceClassName"),
        (all_with_count, "spec.devices.requests[0].exactly.count"),
    ):
        answer = kube_http.post(CLAIMS.format("v1"), json=claim_with(request))
        assert answer.status_code == 422, request
        assert [c["field"] for c in answer.json()["details"]["causes"]] == [field]


def test_a_claims_spec_is_immutable(kube_http: httpx2.Client) -> None:
    good = {"name": "gpu", "exactly": {"deviceClassName": "x"}}
    assert kube_http.post(CLAIMS.format("v1"), json=claim_with(good, "c")).status_code == 201
    changed = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "y"}}]}}}
    answer = kube_http.patch(
        CLAIMS.format("v1") + "/c", json=changed, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert answer.status_code == 422
    assert "field is immutable" in answer.text

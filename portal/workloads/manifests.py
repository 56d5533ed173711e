"""A notebook's Kubernetes objects as pure functions of portal state: no database, no network.

`notebook_manifests(spec)` renders the token Secret, the workspace PersistentVolumeClaim,
the StatefulSet (one replica while running, none while stopped), the Service and, when the
cluster publishes notebooks on a host, the Ingress. The GPU part (extended resources, the node
selector of the GPU model, the tolerations GPU nodes carry, backend annotations such as
HAMi's `nvidia.com/use-gputype`) comes from the offering.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from portal.catalog.validators import quantity_parse
from portal.cluster.manifests import (
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    LABEL_TENANT,
    WORKLOAD_SERVICE_ACCOUNT,
)
from portal.cluster.models import MANAGED_BY

COMPONENT_NOTEBOOK = "notebook"
LABEL_NOTEBOOK = "gpu-portal.io/notebook"
# On the StatefulSet: the SHA-256 of the token its Secret holds. The portal never reads
# Secrets, so a run tells from this whether the Secret is the one it wrote.
ANNOTATION_TOKEN_CHECKSUM = "gpu-portal.io/token-sha256"  # noqa: S105 - a name, not a token
NOTEBOOK_PORT = 8888
WORKSPACE_MOUNT = "/home/jovyan/work"

# The taints GPU nodes commonly carry, per the resource domain a notebook asks for.
GPU_TOLERATIONS = {
    "nvidia.com": {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    "amd.com": {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
}


@dataclass(frozen=True)
class NotebookSpec:
    """Everything a notebook's objects depend on, read from the database by a selector."""

    name: str  # the Kubernetes name, a DNS label: `nb-<id>`
    namespace: str
    tenant_slug: str
    owner: str
    image: str
    cpu_cores: Decimal
    memory_gib: int
    workspace_gib: int
    # per-unit resources of the offering and how many units the notebook holds
    gpu_resources: Mapping[str, str]
    gpu_units: int = 1
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    running: bool = True
    # Jupyter's token, in a Secret: the tenant's developers (`view`) cannot read it; its leads
    # (who manage the namespace's workloads) can.
    token: str = ""
    host: str = ""  # empty: no Ingress, reached through the portal's proxy
    ingress_class: str = ""
    base_url: str = "/"


def _quantity(amount: Decimal) -> str:
    if amount == amount.to_integral_value():
        return str(int(amount))
    return f"{int(amount * 1000)}m"


def notebook_labels(spec: NotebookSpec) -> dict[str, str]:
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_TENANT: spec.tenant_slug,
        LABEL_COMPONENT: COMPONENT_NOTEBOOK,
        LABEL_NOTEBOOK: spec.name,
    }


def _metadata(spec: NotebookSpec, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": spec.namespace, "labels": notebook_labels(spec)}


def workspace_claim_name(spec: NotebookSpec) -> str:
    return f"{spec.name}-workspace"


def notebook_gpu_resources(spec: NotebookSpec) -> dict[str, str]:
    """The extended resources the notebook's container asks for: per unit x units.

    Offerings whose quantities are per device (HAMi's memory and cores) allow one unit per
    workload (`max_units_per_workload`), so multiplying is right wherever more are allowed.
    """
    return {
        name: _quantity(quantity_parse(str(quantity)) * spec.gpu_units)
        for name, quantity in sorted(spec.gpu_resources.items())
    }


def _tolerations(spec: NotebookSpec) -> list[dict[str, str]]:
    domains = sorted({name.split("/", 1)[0] for name in spec.gpu_resources})
    return [GPU_TOLERATIONS[domain] for domain in domains if domain in GPU_TOLERATIONS]


def token_secret_name(spec: NotebookSpec) -> str:
    return f"{spec.name}-token"


def token_checksum(spec: NotebookSpec) -> str:
    return hashlib.sha256(spec.token.encode()).hexdigest()


def _token_secret(spec: NotebookSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(spec, token_secret_name(spec)),
        "type": "Opaque",
        "stringData": {"token": spec.token},
    }


def redacted(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as it may be stored and shown: Secret values replaced."""
    if manifest["kind"] != "Secret":
        return manifest
    values = manifest.get("stringData") or {}
    return manifest | {"stringData": dict.fromkeys(values, "(redacted)")}


def _workspace(spec: NotebookSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(spec, workspace_claim_name(spec)),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": f"{spec.workspace_gib}Gi"}},
        },
    }


def _container(spec: NotebookSpec) -> dict[str, Any]:
    gpus = notebook_gpu_resources(spec)
    compute = {"cpu": _quantity(spec.cpu_cores), "memory": f"{spec.memory_gib}Gi"}
    return {
        "name": "notebook",
        "image": spec.image,
        "args": [
            "start-notebook.py",
            f"--ServerApp.base_url={spec.base_url}",
            # Prometheus reads kernel activity (for culling) from /metrics without a token.
            "--ServerApp.authenticate_prometheus=False",
        ],
        "env": [
            {
                "name": "JUPYTER_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": token_secret_name(spec), "key": "token"}},
            }
        ],
        "ports": [{"name": "http", "containerPort": NOTEBOOK_PORT, "protocol": "TCP"}],
        # Extended resources must have requests equal to limits.
        "resources": {"requests": compute | gpus, "limits": compute | gpus},
        "volumeMounts": [{"name": "workspace", "mountPath": WORKSPACE_MOUNT}],
        "readinessProbe": {
            "httpGet": {"path": f"{spec.base_url.rstrip('/')}/api", "port": NOTEBOOK_PORT},
            "periodSeconds": 10,
        },
        "securityContext": {"allowPrivilegeEscalation": False},
    }


def _stateful_set(spec: NotebookSpec) -> dict[str, Any]:
    selector = {LABEL_NOTEBOOK: spec.name}
    pod_metadata: dict[str, Any] = {
        "labels": notebook_labels(spec),
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(NOTEBOOK_PORT),
            "prometheus.io/path": f"{spec.base_url.rstrip('/')}/metrics",
            **spec.annotations,
        },
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": WORKLOAD_SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "fsGroup": 100},
        "containers": [_container(spec)],
        "volumes": [
            {
                "name": "workspace",
                "persistentVolumeClaim": {"claimName": workspace_claim_name(spec)},
            }
        ],
    }
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    tolerations = _tolerations(spec)
    if tolerations:
        pod_spec["tolerations"] = tolerations
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(spec, spec.name)
        | {"annotations": {ANNOTATION_TOKEN_CHECKSUM: token_checksum(spec)}},
        "spec": {
            "replicas": 1 if spec.running else 0,
            "serviceName": spec.name,
            "selector": {"matchLabels": selector},
            "template": {"metadata": pod_metadata, "spec": pod_spec},
        },
    }


def _service(spec: NotebookSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, spec.name),
        "spec": {
            "selector": {LABEL_NOTEBOOK: spec.name},
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _ingress(spec: NotebookSpec) -> dict[str, Any]:
    ingress_spec: dict[str, Any] = {
        "rules": [
            {
                "host": spec.host,
                "http": {
                    "paths": [
                        {
                            "path": spec.base_url,
                            "pathType": "Prefix",
                            "backend": {"service": {"name": spec.name, "port": {"name": "http"}}},
                        }
                    ]
                },
            }
        ]
    }
    if spec.ingress_class:
        ingress_spec["ingressClassName"] = spec.ingress_class
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _metadata(spec, spec.name),
        "spec": ingress_spec,
    }


def notebook_manifests(spec: NotebookSpec) -> list[dict[str, Any]]:
    """The notebook's objects in apply order: the token and the workspace first, so the pod
    can start with them."""
    manifests = [_token_secret(spec), _workspace(spec), _stateful_set(spec), _service(spec)]
    if spec.host:
        manifests.append(_ingress(spec))
    return manifests


def notebook_host(pattern: str, *, name: str, tenant_slug: str) -> str:
    """The notebook's host from the cluster's pattern, e.g. `{name}.{tenant}.gpu.example.org`."""
    return pattern.format(name=name, tenant=tenant_slug) if pattern else ""

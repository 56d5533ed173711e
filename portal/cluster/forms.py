from django import forms

from portal.cluster.models import ClusterMode, Connection
from portal.core.forms import BoundedForm
from portal.core.validators import INTEGER_MAX

LABELS_HELP = 'As JSON, e.g. {"kubernetes.io/metadata.name": "ingress-nginx"}; {} for none.'


class ClusterForm(BoundedForm):
    """A cluster's settings; the service validates them (names, labels, paths)."""

    name = forms.SlugField(max_length=63, help_text="As the GPU pools name it, e.g. prod-eu")
    mode = forms.ChoiceField(choices=ClusterMode.choices, initial=ClusterMode.DRY_RUN)
    connection = forms.ChoiceField(choices=Connection.choices, initial=Connection.IN_CLUSTER)
    kubeconfig_path = forms.CharField(
        required=False,
        max_length=500,
        help_text="For a kubeconfig connection: the file mounted from a secret",
    )
    kubeconfig_context = forms.CharField(
        required=False, max_length=253, help_text="Empty: its current context"
    )
    namespace_prefix = forms.CharField(required=False, initial="t-", max_length=10)
    ingress_namespace_labels = forms.JSONField(
        required=False,
        initial={"kubernetes.io/metadata.name": "ingress-nginx"},
        help_text=LABELS_HELP,
    )
    monitoring_namespace_labels = forms.JSONField(
        required=False, initial={"kubernetes.io/metadata.name": "monitoring"}, help_text=LABELS_HELP
    )
    identity_prefix = forms.CharField(
        required=False,
        max_length=32,
        initial="oidc:",
        help_text="The API server's OIDC username/group prefix",
    )
    pods_per_namespace = forms.IntegerField(min_value=0, max_value=INTEGER_MAX, initial=50)
    volumes_per_namespace = forms.IntegerField(min_value=0, max_value=INTEGER_MAX, initial=20)
    notebook_host_pattern = forms.CharField(
        required=False,
        max_length=200,
        help_text="Publish notebooks on an Ingress at this host, e.g. {name}.{tenant}.gpu.example."
        "org; empty: no Ingress (reach them by port-forward)",
    )
    notebook_ingress_class = forms.CharField(
        required=False, max_length=63, help_text="Empty: the default class"
    )
    notebook_url_scheme = forms.ChoiceField(
        choices=[("https", "https"), ("http", "http")], required=False, initial="https"
    )
    prometheus_url = forms.CharField(
        required=False,
        max_length=500,
        help_text="The cluster's Prometheus for usage metering; empty: PROMETHEUS_URL",
    )
    metrics_interval_seconds = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=3600,
        initial=30,
        help_text="Scrape interval of kube-state-metrics and the DCGM exporter there",
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def clean_metrics_interval_seconds(self) -> int:
        return int(self.cleaned_data["metrics_interval_seconds"] or 30)

    def clean_notebook_url_scheme(self) -> str:
        return str(self.cleaned_data["notebook_url_scheme"] or "https")

    def clean_ingress_namespace_labels(self) -> object:
        return self.cleaned_data["ingress_namespace_labels"] or {}

    def clean_monitoring_namespace_labels(self) -> object:
        return self.cleaned_data["monitoring_namespace_labels"] or {}

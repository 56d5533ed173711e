from django import forms
from django.utils.translation import gettext_lazy as _

from portal.cluster.models import ClusterMode, Connection
from portal.core.forms import BoundedForm
from portal.core.validators import INTEGER_MAX

LABELS_HELP = _('As JSON, e.g. {"kubernetes.io/metadata.name": "ingress-nginx"}; {} for none.')


class ClusterForm(BoundedForm):
    """A cluster's settings; the service validates them (names, labels, paths)."""

    name = forms.SlugField(
        label=_("Name"), max_length=63, help_text=_("As the GPU pools name it, e.g. prod-eu")
    )
    mode = forms.ChoiceField(
        label=_("Mode"), choices=ClusterMode.choices, initial=ClusterMode.DRY_RUN
    )
    connection = forms.ChoiceField(
        label=_("Connection"), choices=Connection.choices, initial=Connection.IN_CLUSTER
    )
    kubeconfig_path = forms.CharField(
        label=_("Kubeconfig path"),
        required=False,
        max_length=500,
        help_text=_("For a kubeconfig connection: the file mounted from a secret"),
    )
    kubeconfig_context = forms.CharField(
        label=_("Kubeconfig context"),
        required=False,
        max_length=253,
        help_text=_("Empty: its current context"),
    )
    namespace_prefix = forms.CharField(
        label=_("Namespace prefix"), required=False, initial="t-", max_length=10
    )
    ingress_namespace_labels = forms.JSONField(
        label=_("Ingress namespace labels"),
        required=False,
        initial={"kubernetes.io/metadata.name": "ingress-nginx"},
        help_text=LABELS_HELP,
    )
    monitoring_namespace_labels = forms.JSONField(
        label=_("Monitoring namespace labels"),
        required=False,
        initial={"kubernetes.io/metadata.name": "monitoring"},
        help_text=LABELS_HELP,
    )
    identity_prefix = forms.CharField(
        label=_("Identity prefix"),
        required=False,
        max_length=32,
        initial="oidc:",
        help_text=_("The API server's OIDC username/group prefix"),
    )
    pods_per_namespace = forms.IntegerField(
        label=_("Pods per namespace"), min_value=0, max_value=INTEGER_MAX, initial=50
    )
    volumes_per_namespace = forms.IntegerField(
        label=_("Volumes per namespace"), min_value=0, max_value=INTEGER_MAX, initial=20
    )
    notebook_host_pattern = forms.CharField(
        label=_("Notebook host pattern"),
        required=False,
        max_length=200,
        help_text=_(
            "Publish notebooks on an Ingress at this host, e.g. {name}.{tenant}.gpu.example.org; "
            "empty: no Ingress (reach them by port-forward)"
        ),
    )
    notebook_ingress_class = forms.CharField(
        label=_("Notebook ingress class"),
        required=False,
        max_length=63,
        help_text=_("Empty: the default class"),
    )
    notebook_url_scheme = forms.ChoiceField(
        label=_("Notebook url scheme"),
        choices=[("https", "https"), ("http", "http")],
        required=False,
        initial="https",
    )
    prometheus_url = forms.CharField(
        label=_("Prometheus url"),
        required=False,
        max_length=500,
        help_text=_("The cluster's Prometheus for usage metering; empty: PROMETHEUS_URL"),
    )
    metrics_interval_seconds = forms.IntegerField(
        label=_("Metrics interval seconds"),
        required=False,
        min_value=1,
        max_value=3600,
        initial=30,
        help_text=_("Scrape interval of kube-state-metrics and the DCGM exporter there"),
    )
    enabled = forms.BooleanField(label=_("Enabled"), required=False, initial=True)

    def clean_metrics_interval_seconds(self) -> int:
        return int(self.cleaned_data["metrics_interval_seconds"] or 30)

    def clean_notebook_url_scheme(self) -> str:
        return str(self.cleaned_data["notebook_url_scheme"] or "https")

    def clean_ingress_namespace_labels(self) -> object:
        return self.cleaned_data["ingress_namespace_labels"] or {}

    def clean_monitoring_namespace_labels(self) -> object:
        return self.cleaned_data["monitoring_namespace_labels"] or {}

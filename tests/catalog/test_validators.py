from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from portal.catalog.validators import (
    extended_resource_name_problem,
    quantity_parse,
    validate_annotations,
    validate_label_key,
    validate_label_value,
    validate_resources,
)


@pytest.mark.parametrize(
    "name",
    [
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/gpumem",
        "aliyun.com/gpu-mem",
        "tencent.com/vcuda-core",
        "amd.com/gpu",
    ],
)
def test_backend_resource_names_are_valid_extended_resources(name) -> None:
    assert extended_resource_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("nvidia gpu", "needs a domain prefix"),
        ("gpu", "needs a domain prefix"),
        ("kubernetes.io/gpu", "reserved"),
        ("node.kubernetes.io/gpu", "reserved"),
        ("NVIDIA.com/gpu", "not a valid DNS subdomain"),
        ("/gpu", "not a valid DNS subdomain"),
        ("nvidia.com/", "must be at most 63"),
        ("nvidia.com/-gpu", "must be at most 63"),
        ("nvidia.com/" + "g" * 64, "must be at most 63"),
    ],
)
def test_invalid_extended_resource_names_say_why(name, problem) -> None:
    assert problem in (extended_resource_name_problem(name) or "")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)),
        (" 7 ", Decimal(7)),
        ("500m", Decimal("0.5")),
        ("10Gi", Decimal(10 * 2**30)),
        ("2k", Decimal(2000)),
        ("1e3", Decimal(1000)),
        ("0.25", Decimal("0.25")),
    ],
)
def test_quantities_parse_exactly_as_kubernetes_reads_them(text, value) -> None:
    assert quantity_parse(text) == value


@pytest.mark.parametrize("text", ["two", "", "1.2.3", "10 Gi", "1GB", "Gi"])
def test_junk_is_not_a_quantity(text) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity_parse(text)


def test_whole_positive_quantities_of_valid_names_are_accepted() -> None:
    validate_resources({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20480", "x.io/y": 3})


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({}, "at least one resource"),
        (["nvidia.com/gpu"], "at least one resource"),
        ({"nvidia.com/gpu": "two"}, "not a Kubernetes quantity"),
        ({"nvidia.com/gpu": "500m"}, "whole units"),
        ({"nvidia.com/gpu": "0"}, "whole units"),
        ({"nvidia.com/gpu": "-1"}, "whole units"),
        ({"kubernetes.io/gpu": "1"}, "reserved"),
    ],
)
def test_bad_resources_are_refused_with_the_reason(resources, message) -> None:
    with pytest.raises(ValidationError) as refused:
        validate_resources(resources)

    assert message in " ".join(refused.value.messages)


def test_every_bad_resource_is_reported_not_only_the_first() -> None:
    with pytest.raises(ValidationError) as refused:
        validate_resources({"nvidia gpu": "1", "nvidia.com/gpu": "half"})

    assert len(refused.value.messages) == 2


def test_annotations_need_qualified_keys_and_text_values() -> None:
    validate_annotations({"nvidia.com/use-gputype": "NVIDIA A100-SXM4-80GB", "plain-key": ""})

    with pytest.raises(ValidationError, match="annotation key"):
        validate_annotations({"bad key!": "x"})
    with pytest.raises(ValidationError, match="must be text"):
        validate_annotations({"nvidia.com/use-gputype": 100})
    with pytest.raises(ValidationError, match="key: value"):
        validate_annotations(["nvidia.com/use-gputype"])


@pytest.mark.parametrize(
    "value", ["NVIDIA-A100-SXM4-80GB", "Tesla-T4", "AMD_INSTINCT_MI250_MCM_OAM_AC_MBA", "x", ""]
)
def test_node_label_values_as_the_labellers_write_them_are_valid(value) -> None:
    validate_label_value(value)


@pytest.mark.parametrize(
    "value", ["NVIDIA A100-SXM4-80GB", "-leading-dash", "trailing.", "a/b", "x" * 64]
)
def test_bad_node_label_values_are_refused(value) -> None:
    with pytest.raises(ValidationError, match="Not a valid label value"):
        validate_label_value(value)


def test_label_keys_may_have_a_dns_prefix() -> None:
    validate_label_key("nvidia.com/gpu.product")
    validate_label_key("amd.com/gpu.product-name")
    validate_label_key("gpushare")

    for key in ("bad key", "/gpu.product", "nvidia.com/", "Nvidia.com/gpu.product"):
        with pytest.raises(ValidationError, match="Not a valid label key"):
            validate_label_key(key)

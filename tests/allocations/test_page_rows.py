"""*My requests*, *All requests* and *Approvals* write their rows in Python
(portal/allocations/page_rows.py): each page's rows against the template loop they replaced, in
Chinese, over requests in every state a row shows differently (waiting for a lead, an approved
allocation with its run queued, an active one with an extension waiting, a refusal with a
comment, a release) and, in a lead's queue, their own request and extension beside others'."""

import re
from datetime import timedelta

import pytest
from django.template import engines
from django.utils import timezone, translation

from portal.allocations.models import ExtensionState, GpuRequest, GpuRequestExtension, RequestState
from portal.allocations.services import gpu_request_submit
from portal.catalog.services import gpu_pool_create
from portal.cluster.services import cluster_create

# The rows as templates/allocations/all.html wrote them (with the multiplication sign).
# ruff: noqa: RUF001
ALL_ROWS = """{% load i18n gpu_eq %}{% for gpu_request in page %}
      <tr>
        <td>{{ gpu_request.pk }}</td>
        <td>{{ gpu_request.created_at|date:"DATETIME_FORMAT" }}</td>
        <td>{{ gpu_request.tenant.slug }}</td>
        <td>{{ gpu_request.requester.username }}</td>
        <td><a href="{% url 'allocations:detail' gpu_request.pk %}">{{ gpu_request.count }} × {{ gpu_request.offering.name }}</a></td>
        <td title="{{ gpu_request.gpu_eq }}">{{ gpu_request.gpu_eq|gpu_eq }}</td>
        <td>{% include "allocations/_state.html" %}</td>
        <td>{{ gpu_request.ends_at|date:"DATETIME_FORMAT"|default:"—" }}</td>
        {% if user.is_portal_admin %}<td>{% if gpu_request.state == "approved" or gpu_request.state == "active" %}
          <form method="post" action="{% url 'allocations:transition' gpu_request.pk 'revoke' %}" class="inline" hx-post="{% url 'allocations:transition' gpu_request.pk 'revoke' %}" hx-target="body" hx-swap="beforeend">{% csrf_token %}<input type="hidden" name="next" value="{% url 'allocations:all' %}"><input name="comment" required placeholder="{% translate 'reason' %}" aria-label="{% blocktranslate with pk=gpu_request.pk %}Reason to revoke {{ pk }}{% endblocktranslate %}"><button type="submit" class="danger">{% translate "Revoke" %}</button></form>
        {% endif %}</td>{% endif %}
      </tr>{% endfor %}"""  # noqa: E501

# The rows as templates/allocations/mine.html wrote them, with _extension_cell.html in place.
MY_ROWS = """{% load i18n gpu_eq %}{% for gpu_request in page %}
        <tr>
          <td>{{ gpu_request.pk }}</td>
          <td>{{ gpu_request.tenant.slug }}</td>
          <td><a href="{% url 'allocations:detail' gpu_request.pk %}">{{ gpu_request.count }} × {{ gpu_request.offering.name }}</a></td>
          <td title="{{ gpu_request.gpu_eq }}">{{ gpu_request.gpu_eq|gpu_eq }}</td>
          <td>{% include "allocations/_state.html" %}{% if gpu_request.decision_comment %}<br><small>{% translate gpu_request.decision_comment %}</small>{% endif %}</td>
          <td data-testid="time-left-{{ gpu_request.pk }}" data-ends-at="{{ gpu_request.ends_at|date:'c' }}">{% if gpu_request.state == "approved" or gpu_request.state == "active" %}{{ gpu_request.ends_at|timeuntil }}{% else %}—{% endif %}</td>
          <td data-testid="cost-{{ gpu_request.pk }}">{{ gpu_request.cost|default:"—" }}</td>
          <td>
            {% if gpu_request.state == "pending" %}
              <form method="post" action="{% url 'allocations:transition' gpu_request.pk 'cancel' %}" class="inline">{% csrf_token %}<button type="submit">{% translate "Cancel" %}</button></form>
            {% elif gpu_request.state == "approved" or gpu_request.state == "active" %}
              <a href="{% url 'workloads:new' %}?allocation={{ gpu_request.pk }}">{% translate "Launch a notebook" %}</a>
              <form method="post" action="{% url 'allocations:transition' gpu_request.pk 'release' %}" class="inline" hx-post="{% url 'allocations:transition' gpu_request.pk 'release' %}" hx-target="body" hx-swap="beforeend">{% csrf_token %}<button type="submit">{% translate "Release" %}</button></form>
              {% if gpu_request.pending_extension %}
<br><span class="state pending" data-testid="extension-waiting-{{ gpu_request.pk }}">{% blocktranslate with hours=gpu_request.pending_extension.hours %}Extension by {{ hours }} h waiting for a lead{% endblocktranslate %}</span>
<form method="post" action="{% url 'allocations:extension-decide' gpu_request.pending_extension.pk 'cancel' %}" class="inline">{% csrf_token %}<button type="submit" aria-label="{% blocktranslate with id=gpu_request.pk %}Cancel extension of request {{ id }}{% endblocktranslate %}">{% translate "Cancel extension" %}</button></form>
{% else %}
<form method="post" action="{% url 'allocations:extend' gpu_request.pk %}" class="inline">{% csrf_token %}<input type="number" name="hours" min="1" value="1" aria-label="{% translate 'Hours to extend' %}" class="narrow-input"><button type="submit">{% translate "Extend" %}</button></form>
{% endif %}
            {% endif %}
          </td>
        </tr>{% endfor %}"""  # noqa: E501


# The quota left beside a row, as templates/allocations/_quota_left.html wrote it.
QUOTA_LEFT = """{% if left %}<span title="{{ left.remaining }} / {{ left.quota }}">{% blocktranslate trimmed with remaining=left.remaining|gpu_eq quota=left.quota|gpu_eq model=model.name %}
  {{ remaining }} of {{ quota }} GPU-eq ({{ model }})
{% endblocktranslate %}</span>{% else %}{% blocktranslate with model=model.name %}no quota for {{ model }}{% endblocktranslate %}{% endif %}"""  # noqa: E501

# The rows of the requests waiting, as templates/allocations/approvals.html wrote them.
APPROVAL_ROWS = """{% load i18n gpu_eq %}{% for gpu_request in page %}
      <tr data-testid="pending-{{ gpu_request.pk }}">
        <td><input type="checkbox" name="ids" value="{{ gpu_request.pk }}" form="approve-selected" aria-label="{% blocktranslate with id=gpu_request.pk %}Select request {{ id }}{% endblocktranslate %}"></td>
        <td>{% blocktranslate with since=gpu_request.created_at|timesince %}{{ since }} ago{% endblocktranslate %}</td>
        <td>{{ gpu_request.tenant.slug }}</td>
        <td>{{ gpu_request.requester.username }}</td>
        <td>{{ gpu_request.count }} × {{ gpu_request.offering.name }}</td>
        <td title="{{ gpu_request.gpu_eq }}">{{ gpu_request.gpu_eq|gpu_eq }}</td>
        <td>{{ gpu_request.duration_hours }}</td>
        <td data-testid="quota-left-{{ gpu_request.pk }}">{% with left=gpu_request.quota_left model=gpu_request.gpu_model %}QUOTA_LEFT{% endwith %}</td>
        <td>{{ gpu_request.justification|default:"—" }}</td>
        <td>
          {% if gpu_request.requester_id == user.pk and not user.is_portal_admin %}
            <small>{% translate "your own: another lead or an admin decides" %}</small>
          {% else %}
          <form method="post" action="{% url 'allocations:transition' gpu_request.pk 'approve' %}" class="inline">
            {% csrf_token %}<input type="hidden" name="next" value="{% url 'allocations:approvals' %}">
            <input type="text" name="comment" placeholder="{% translate 'comment' %}" aria-label="{% blocktranslate with id=gpu_request.pk %}Comment on request {{ id }}{% endblocktranslate %}">
            <button type="submit">{% translate "Approve" %}</button>
            <button type="submit" formaction="{% url 'allocations:transition' gpu_request.pk 'reject' %}">{% translate "Reject" %}</button>
          </form>
          {% endif %}
        </td>
      </tr>{% endfor %}""".replace("QUOTA_LEFT", QUOTA_LEFT)  # noqa: E501

# The rows of the extensions waiting, as templates/allocations/approvals.html wrote them.
EXTENSION_ROWS = """{% load i18n gpu_eq %}{% for extension in extensions %}
      {% with allocation=extension.request %}
      <tr data-testid="extension-{{ extension.pk }}">
        <td>{% blocktranslate with since=extension.created_at|timesince %}{{ since }} ago{% endblocktranslate %}</td>
        <td>{{ allocation.tenant.slug }}</td>
        <td>{{ extension.requested_by.username }}</td>
        <td>{% blocktranslate with id=allocation.pk units=allocation.count offering=allocation.offering.name %}#{{ id }}: {{ units }} × {{ offering }}{% endblocktranslate %} ({{ allocation.gpu_eq|gpu_eq }} GPU-eq)</td>
        <td>{{ allocation.ends_at|default:"—" }}</td>
        <td data-testid="extension-hours-{{ extension.pk }}">{% blocktranslate trimmed with hours=extension.hours total=allocation.duration_hours|add:extension.hours max=allocation.tenant.max_duration_hours %}
          +{{ hours }} h ({{ total }} of at most {{ max }} h)
        {% endblocktranslate %}</td>
        <td data-testid="extension-quota-left-{{ extension.pk }}">{% with left=extension.quota_left model=allocation.gpu_model %}QUOTA_LEFT{% endwith %}</td>
        <td>{{ extension.reason }}</td>
        <td>
          {% if not user.is_portal_admin and extension.requested_by_id == user.pk or not user.is_portal_admin and allocation.requester_id == user.pk %}
            <small>{% translate "your own: another lead or an admin decides" %}</small>
          {% else %}
          <form method="post" action="{% url 'allocations:extension-decide' extension.pk 'approve' %}" class="inline">
            {% csrf_token %}<input type="hidden" name="next" value="{% url 'allocations:approvals' %}">
            <input type="text" name="comment" placeholder="{% translate 'comment' %}" aria-label="{% blocktranslate with id=extension.pk %}Comment on extension {{ id }}{% endblocktranslate %}">
            <button type="submit" data-testid="approve-extension-{{ extension.pk }}">{% translate "Approve" %}</button>
            <button type="submit" formaction="{% url 'allocations:extension-decide' extension.pk 'reject' %}" data-testid="reject-extension-{{ extension.pk }}">{% translate "Reject" %}</button>
          </form>
          {% endif %}
        </td>
      </tr>
      {% endwith %}{% endfor %}""".replace("QUOTA_LEFT", QUOTA_LEFT)  # noqa: E501


def tags_only(html: str) -> str:
    """`html` without whitespace between tags, and with each CSRF token the same (each is
    masked anew: any of them is the page's)."""
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', 'name="csrfmiddlewaretoken"', html)
    return re.sub(r">\s+<", "><", html.strip())


def shown_rows(html: str) -> str:
    body = re.search(r"<tbody>(.*?)</tbody>", html, re.S)
    assert body
    return tags_only(body.group(1))


@pytest.fixture
def requests_in_every_state(developer, admin_user, a100_tenant, catalog) -> list[GpuRequest]:
    cluster_create(actor=admin_user, name="lab")
    whole = catalog["a100-80gb-whole"]
    gpu_pool_create(
        actor=admin_user, cluster="lab", name="a100", gpu_model=whole.gpu_model,
        backend=whole.backend, node_count=1,
    )  # fmt: skip
    rows = [
        gpu_request_submit(actor=developer, tenant=a100_tenant, offering=whole, count=1)
        for _ in range(5)
    ]
    queued, pending, active, refused, released = rows
    assert queued.state == RequestState.APPROVED
    GpuRequest.objects.filter(pk=pending.pk).update(state=RequestState.PENDING)
    # Mid-minute, so that "time left" reads the same however long the page takes.
    ends = timezone.now() + timedelta(hours=3, seconds=30)
    GpuRequest.objects.filter(pk=active.pk).update(state=RequestState.ACTIVE, ends_at=ends)
    GpuRequestExtension.objects.create(
        request=active, hours=4, reason="more", requested_by=developer,
        state=ExtensionState.PENDING,
    )  # fmt: skip
    GpuRequest.objects.filter(pk=refused.pk).update(
        state=RequestState.REJECTED, decision_comment="<b>No</b> & 'not now'"
    )
    GpuRequest.objects.filter(pk=released.pk).update(state=RequestState.RELEASED)
    return rows


def test_my_requests_rows_are_written_as_the_template_wrote_them(
    client_for, developer, requests_in_every_state
) -> None:
    response = client_for(developer).get("/requests/", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert response.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
    assert token
    with translation.override("zh-hans"):
        expected = (
            engines["django"]
            .from_string(MY_ROWS)
            .render({"page": response.context["page"], "csrf_token": token.group(1)})
        )
    assert shown_rows(response.text) == tags_only(expected)
    assert "&lt;b&gt;No&lt;/b&gt; &amp; &#x27;not now&#x27;" in expected
    assert 'data-testid="extension-waiting-' in expected
    assert 'data-testid="waiting-link-' in expected


def test_all_requests_rows_are_written_as_the_template_wrote_them(
    client_for, admin_user, finance_user, requests_in_every_state
) -> None:
    for user in (admin_user, finance_user):  # finance has no column to revoke
        response = client_for(user).get("/manage/requests/", HTTP_ACCEPT_LANGUAGE="zh-hans")

        assert response.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
        with translation.override("zh-hans"):
            expected = (
                engines["django"]
                .from_string(ALL_ROWS)
                .render(
                    {
                        "page": response.context["page"],
                        "user": user,
                        "csrf_token": token.group(1) if token else "",
                    }
                )
            )
        assert shown_rows(response.text) == tags_only(expected)
        assert ('class="danger">收回</button>' in expected) == (user == admin_user)  # "Revoke"


@pytest.fixture
def the_leads_own(lead, a100_tenant, catalog, requests_in_every_state) -> None:
    """A request of the lead's waiting, and an extension of the lead's allocation."""
    whole = catalog["a100-80gb-whole"]
    waiting, active = (
        gpu_request_submit(actor=lead, tenant=a100_tenant, offering=whole, count=1)
        for _ in range(2)
    )
    GpuRequest.objects.filter(pk=waiting.pk).update(state=RequestState.PENDING)
    GpuRequest.objects.filter(pk=active.pk).update(
        state=RequestState.ACTIVE, ends_at=timezone.now() + timedelta(hours=2)
    )
    GpuRequestExtension.objects.create(
        request=active, hours=2, reason="<i>mine</i>", requested_by=lead,
        state=ExtensionState.PENDING,
    )  # fmt: skip


@pytest.mark.usefixtures("the_leads_own")
def test_approvals_rows_are_written_as_the_template_wrote_them(
    client_for, lead, admin_user
) -> None:
    for user in (lead, admin_user):  # the lead cannot decide their own; an admin can
        client = client_for(user)
        page = client.get("/approvals/", HTTP_ACCEPT_LANGUAGE="zh-hans")
        section = client.get(
            "/approvals/extensions/", HTTP_ACCEPT_LANGUAGE="zh-hans", HTTP_HX_REQUEST="true"
        )

        assert page.status_code == section.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token
        context = {
            "page": page.context["page"],
            "extensions": section.context["extensions"],
            "user": user,
            "csrf_token": token.group(1),
        }
        with translation.override("zh-hans"):
            requests = engines["django"].from_string(APPROVAL_ROWS).render(context)
            extensions = engines["django"].from_string(EXTENSION_ROWS).render(context)
        assert shown_rows(page.text) == tags_only(requests)
        assert shown_rows(section.text) == tags_only(extensions)
        assert requests.count("<tr") == extensions.count("<tr") == 2
        assert "&lt;i&gt;mine&lt;/i&gt;" in extensions
        own = ("您自己的" in requests, "您自己的" in extensions)  # "your own: …"
        assert own == ((True, True) if user == lead else (False, False)), own

"""One pager for every paginated page: its links keep the page's filters."""

from django.urls import reverse

from tenants.services import tenant_create


def test_the_next_page_keeps_the_search_and_filters(db, client_for, admin_user):
    for index in range(30):
        tenant_create(actor=admin_user, slug=f"team-{index:02d}", name=f"Team {index}")
    client = client_for(admin_user)
    html = client.get(reverse("tenants:manage"), {"q": "team", "state": "active"}).content.decode()
    assert "Page 1 of 2 (30 tenants)" in html
    assert 'href="?q=team&amp;state=active&amp;page=2">Next</a>' in html
    second = client.get(reverse("tenants:manage"), {"q": "team", "state": "active", "page": 2})
    html = second.content.decode()
    assert 'href="?q=team&amp;state=active&amp;page=1">Previous</a>' in html
    assert "Next</a>" not in html


def test_the_audit_log_pages_from_newer_to_older(db, client_for, admin_user):
    for index in range(60):
        tenant_create(actor=admin_user, slug=f"t-{index:02d}", name=f"T {index}")
    html = client_for(admin_user).get(reverse("audit"), {"action": "tenant."}).content.decode()
    assert 'href="?action=tenant.&amp;page=2">Older</a>' in html
    assert "Newer</a>" not in html

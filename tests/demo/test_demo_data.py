from django.core.management import call_command

from portal.accounts.models import User
from portal.demo.management.commands.demo_data import DEMO_PASSWORD
from tenants.models import Membership, Tenant


def test_demo_data_loads_personas_and_can_run_again(db, capsys) -> None:
    call_command("demo_data")
    counts = (User.objects.count(), Tenant.objects.count(), Membership.objects.count())
    call_command("demo_data")

    assert (User.objects.count(), Tenant.objects.count(), Membership.objects.count()) == counts
    for username in ("developer", "lead", "finance", "admin"):
        assert User.objects.get(username=username).check_password(DEMO_PASSWORD)
    assert DEMO_PASSWORD in capsys.readouterr().out

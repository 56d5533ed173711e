"""`python manage.py create_admin <username>`: a local admin with a password (`create_user`
with `--role admin`).

The first admin of a new installation, or the break-glass account that may still sign in with a
password when single sign-on is on (list it in PORTAL_BREAK_GLASS_USERS).
"""

from portal.accounts.management.commands.create_user import Command as CreateUser


class Command(CreateUser):
    help = "Create a local admin account with a password (asked for, or read from stdin)."
    role = "admin"

"""`python manage.py create_user <username> [--role finance|admin]`: a local account with a
password, for installations without single sign-on (developers and leads: then add them to a
tenant on its page or with `POST /api/v1/tenants/<slug>/members/`), for scripts, and
for the break-glass account that may still sign in with a password when single sign-on is on
(list it in PORTAL_BREAK_GLASS_USERS).
"""

import sys
from getpass import getpass
from typing import Any

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.accounts.models import GlobalRole
from portal.accounts.services import user_create
from portal.core.errors import ApplicationError

ROLES = {"none": GlobalRole.NONE, "finance": GlobalRole.FINANCE, "admin": GlobalRole.ADMIN}


class Command(BaseCommand):
    help = "Create a local account with a password (asked for, or read from stdin)."
    role: str | None = None  # set by create_admin

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password-stdin", action="store_true", help="read the password from stdin"
        )
        if self.role is None:
            parser.add_argument(
                "--role", choices=sorted(ROLES), default="none", help="global role (default none)"
            )

    def handle(
        self, *args: Any, username: str, email: str, password_stdin: bool, **options: Any
    ) -> None:
        role = ROLES[self.role or options.get("role") or "none"]
        password = self._password(password_stdin)
        try:
            user_create(
                actor=None, username=username, email=email, password=password, global_role=role
            )
        except ApplicationError as error:
            raise CommandError(error.message) from None
        self.stdout.write(f"Created {username} (global role: {role.label}).")

    def _password(self, from_stdin: bool) -> str:
        if from_stdin:
            password = sys.stdin.readline().rstrip("\n")
        else:
            password = getpass("Password: ")
            if getpass("Password (again): ") != password:
                raise CommandError("The passwords differ.")
        try:
            validate_password(password)
        except ValidationError as error:
            raise CommandError(f"password: {' '.join(error.messages)}") from None
        return password

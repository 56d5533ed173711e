"""`python manage.py create_admin <username>`: a local admin with a password.

The first admin of a new installation, or the break-glass account that may still sign in with a
password when single sign-on is on (list it in PORTAL_BREAK_GLASS_USERS).
"""

import sys
from getpass import getpass
from typing import Any

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.accounts.models import GlobalRole
from portal.accounts.services import user_create
from portal.core.errors import Conflict


class Command(BaseCommand):
    help = "Create a local admin account with a password (asked for, or read from stdin)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password-stdin", action="store_true", help="read the password from stdin"
        )

    def handle(self, *args: Any, username: str, email: str, password_stdin: bool, **_: Any) -> None:
        if password_stdin:
            password = sys.stdin.readline().rstrip("\n")
        else:
            password = getpass("Password: ")
            if getpass("Password (again): ") != password:
                raise CommandError("The passwords differ.")
        try:
            validate_password(password)
        except ValidationError as error:
            raise CommandError(f"password: {' '.join(error.messages)}") from None
        try:
            user_create(
                actor=None,
                username=username,
                email=email,
                password=password,
                global_role=GlobalRole.ADMIN,
            )
        except Conflict as error:
            raise CommandError(error.message) from None
        self.stdout.write(f"Created the admin {username}.")

#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as error:
        # A configuration mistake is the operator's to fix: say what, not where in the code.
        sys.stderr.write(f"configuration error: {error}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()

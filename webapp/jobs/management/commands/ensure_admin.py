"""Create the ``admin`` superuser once, printing its generated password that one time."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the admin account if it does not exist, and print its password once."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options):
        user_model = get_user_model()
        if user_model.objects.filter(username=username).exists():
            self.stdout.write(f"Admin account {username!r} exists (password printed when it was created; "
                              f"reset it with `manage.py changepassword {username}`).")
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(self.style.SUCCESS(f"Admin account created: user {username!r}, password {password!r} "
                                             f"(shown only this once)."))

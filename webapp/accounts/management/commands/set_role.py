"""Give a user one role: viewer, operator or admin (creating the user with a password if asked)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.roles import ROLES, user_set_role


class Command(BaseCommand):
    help = "Give USER exactly one role (viewer, operator, admin)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("role", choices=ROLES)
        parser.add_argument("--create-with-password", default=None, help="Create the user with this password.")

    def handle(self, *args, username: str, role: str, create_with_password: str | None, **options):
        users = get_user_model()
        user = users.objects.filter(username=username).first()
        if user is None:
            if not create_with_password:
                raise CommandError(f"no user {username!r}; pass --create-with-password to create it")
            user = users.objects.create_user(username=username, password=create_with_password)
        user_set_role(user=user, role=role)
        self.stdout.write(self.style.SUCCESS(f"{username} is now {role}"))

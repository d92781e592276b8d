"""The product surface: Django models, services, Celery tasks, dashboard and API."""

from webapp.celery import app as celery_app

__all__ = ["celery_app"]

"""Celery tasks of the platform (thin wrappers; the work lives in hostmgmt.console)."""

from celery import shared_task

from hostmgmt.console import updater


@shared_task(ignore_result=True)
def check_for_update() -> None:
    """Periodic release-manifest check; failures are recorded in the update status."""
    try:
        updater.check()
    except updater.CheckRefused:
        pass  # checks disabled by the operator

from django.apps import AppConfig


class HostmgmtConfig(AppConfig):
    name = "hostmgmt"
    verbose_name = "Host"

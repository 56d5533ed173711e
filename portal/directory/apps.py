from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DirectoryConfig(AppConfig):
    name = "portal.directory"
    label = "directory"
    verbose_name = _("Directory sync")

    def ready(self) -> None:
        from portal.core.metrics import collector_register
        from portal.directory.home import directory_home_register
        from portal.directory.metrics import DirectoryCollector
        from portal.directory.receivers import group_follows_membership, groups_follow_new_tenant
        from tenants.signals import membership_changed, tenant_created

        collector_register(DirectoryCollector())
        directory_home_register()
        tenant_created.connect(groups_follow_new_tenant, dispatch_uid="directory.tenant")
        membership_changed.connect(group_follows_membership, dispatch_uid="directory.member")

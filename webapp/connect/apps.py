from django.apps import AppConfig


class ConnectConfig(AppConfig):
    """Kafka Connect REST API, the Herder, and the node's assembly (``runnode``)."""

    name = "webapp.connect"
    label = "connect"

    def ready(self) -> None:
        """Forget the checked ``auth_user`` rows whenever a user row or a group membership changes here;
        name the user in every new session (``api.sessions``)."""
        from django.contrib.auth import get_user_model, user_logged_in
        from django.contrib.auth.models import Group
        from django.db.models.signals import m2m_changed, post_delete, post_save

        from .api.accounts import forget_mirrors
        from .api.sessions import remember_user_name

        user = get_user_model()
        for signal in (post_save, post_delete):
            signal.connect(forget_mirrors, sender=user, dispatch_uid=f"raftconnect-mirror-{signal is post_save}-user")
            signal.connect(forget_mirrors, sender=Group, dispatch_uid=f"raftconnect-mirror-{signal is post_save}-group")
        m2m_changed.connect(forget_mirrors, sender=user.groups.through, dispatch_uid="raftconnect-mirror-groups")
        user_logged_in.connect(remember_user_name, dispatch_uid="raftconnect-session-user-name")

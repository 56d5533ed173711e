"""Browser sessions in the database, as Django's `db` engine keeps them, each page's session
read with SQL built once per process (`KeyedRead`): every page reads it first, and building
its query cost more than PostgreSQL's answer. `SESSION_ENGINE` names this module."""

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from portal.core.prepared import KeyedRead

_SESSION_BY_KEY = KeyedRead(Session, "session_key")


class SessionStore(DatabaseSessionStore):
    def _get_session_from_db(self) -> Session | None:
        """The session if it has not expired (as Django's engine reads it: by its key, an
        expired one as none, and then a new key)."""
        session = _SESSION_BY_KEY.get(self.session_key)
        if session is None or session.expire_date <= timezone.now():
            self._session_key = None
            return None
        return session

"""Settings for in-process tests: the real settings on a throwaway state directory."""

import os
import tempfile

os.environ.setdefault("HOST_STATE_DIR", tempfile.mkdtemp(prefix="hostmgmt-unit-"))
os.environ.setdefault("HOST_LOG_LEVEL", "WARNING")

from hostmgmt.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast unit tests only

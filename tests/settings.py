"""Settings for in-process tests: the real settings on a throwaway state directory."""

import os
import tempfile

# One per xdist worker: the workers inherit the controller's environment, and in-process tests
# write the state directory's files (config, tokens). The mark is not a HOST_ variable, so it
# survives the tests that start a subprocess on a state directory of its own (they drop every
# HOST_ variable and set HOST_STATE_DIR).
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker and os.environ.get("TESTS_STATE_DIR_WORKER") != _worker:
    os.environ.pop("HOST_STATE_DIR", None)
    os.environ["TESTS_STATE_DIR_WORKER"] = _worker
os.environ.setdefault("HOST_STATE_DIR", tempfile.mkdtemp(prefix=f"hostmgmt-unit-{_worker}"))
os.environ.setdefault("HOST_LOG_LEVEL", "WARNING")

from hostmgmt.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast unit tests only

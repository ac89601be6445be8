"""The signed plugin store: catalog sources, catalogs verified with each source's Ed25519 key,
and install/uninstall jobs that pip-install a hash-pinned wheel into the plugin environment
(docs/plugins.md, "The store").

Plain Python (no DRF): `services` is what the API views and the Celery task call; the other
modules are its parts. Every file it keeps lives under `<state>/plugins/store/`, written
atomically.
"""

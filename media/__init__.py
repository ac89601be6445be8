"""Encode, capture, sound and input: no Django, no app (imports only the standard
library, third-party packages, common and hostconfig)."""

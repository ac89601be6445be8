"""The streaming engine: capture, encode, packetize and send one session's media.

Built on the protocol packages in :mod:`compat`; imports no Django views.
"""

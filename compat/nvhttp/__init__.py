"""nvhttp: the GameStream control protocol (serverinfo, PIN pairing, app list) spoken over HTTP
on the base port and over client-certificate-pinned HTTPS on base - 5.

Nothing here imports Django or Twisted: `dispatch.Dispatcher` turns an `NvRequest` into an
`NvResponse` and reaches the host only through the `Backend` protocol; `transport` adapts it to
Twisted, and `compat.nvhttp_backend` implements the backend with the ORM.
"""

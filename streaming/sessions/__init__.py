"""The session core: what every session does whatever plane carries it (docs/architecture.md,
"Path of a session"). `lifecycle` owns the steps, `registry` the live sessions, `runtime` and
`manager` the one process per session, `process` that process's body."""

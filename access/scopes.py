"""The admin API's scope vocabulary (spec: admin API, Authentication).

`config:exec` is this host's addition: `config:set` writes ordinary keys and app entries, while
keys and app fields that run commands or choose a file the host writes, executes or serves
(marked in `hostconfig/schema.py`) also need `config:exec`. A holder of both can run code
as the host user, so `config:exec` is as strong as `*` in effect; it is a scope of its own so a
`tokens:manage` token can grant it only when it holds it.
"""

ADMIN = "*"
CONFIG_EXEC = "config:exec"
SCOPES = frozenset(
    {
        "config:get",
        "config:set",
        CONFIG_EXEC,
        "apps:get",
        "apps:launch",
        "apps:close",
        "clients:list",
        "clients:pair",
        "clients:unpair",
        "logs:get",
        "display:reset",
        "tokens:manage",
        ADMIN,
    }
)

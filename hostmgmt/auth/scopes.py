"""The admin API's scope vocabulary (spec: admin API, Authentication)."""

ADMIN = "*"
SCOPES = frozenset(
    {
        "config:get",
        "config:set",
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

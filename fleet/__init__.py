"""A fleet: this host's console and API over other hosts (members), through what each member
already serves (the v1 management API over TLS and its event stream). docs/fleet.md."""

"""The operator console's domain code: tokens, logs, telemetry, updater, runtime status."""

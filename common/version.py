"""The one place the build version lives.

Form `v<YYYY>.<MDD>.<N>-<suffix>` (spec: admin API, Versioning): month without a leading zero,
day with two digits, N the build of that day.
"""

VERSION = "v2026.1126.0-dev"

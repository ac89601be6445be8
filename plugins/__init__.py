"""Plugins: Python distributions installed into their own environment, run by the host's
supervised runner with a plugin token, registered through `/api/v1/plugins`, and installed from
signed store catalogs. docs/plugins.md is the operator's and the plugin author's guide."""

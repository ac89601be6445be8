"""The host configuration: one schema (`schema`), one file (`store`). Both APIs go through here."""

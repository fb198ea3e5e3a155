"""The `campusguard` command line (app layer)."""

"""The CampusGuard camera application: config, camera readers, pipeline workers, rules, events, alerts, demo.

This layer imports the vision kit; the kit never imports it.
"""

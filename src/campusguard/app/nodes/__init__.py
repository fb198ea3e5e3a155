"""Nodes: several `campusguard serve` processes sharing one PostgreSQL database run the site's cameras.

- `assign`: who should run each camera, a pure function of the live nodes (balanced, sticky, preferences).
- `directory`: the nodes and camera leases in PostgreSQL (heartbeats, leases renewed every second).
- `coordinator`: one node's loop: heartbeat, take the cameras assigned to it, hand over the others,
  and stop every camera when it cannot renew its leases (fencing: no camera is ever run twice).
"""

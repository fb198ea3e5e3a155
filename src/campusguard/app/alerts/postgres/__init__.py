"""The alert sinks' delivery state in PostgreSQL, shared by every node of one database.

When the config's storage is PostgreSQL (``storage: {postgresql: URL}``), the durable sinks keep
their outbox (`outbox.PgOutbox`), the delivery ledger (`ledger.PgDeliveryLedger`) and the rules'
escalation deadlines (`deadlines.PgDeadlines`) in the event store's database instead of SQLite
files beside it, so whichever node is alive delivers what a dead one left, exactly once:

- tables ``alert_outbox`` (messages, per sink name), ``alert_outbox_put`` (the updates put into
  each sink's outbox, unique per ``(sink, event_id, phase, sequence)``), ``alert_delivered``
  (the delivery ledger) and ``alert_escalations``, with their version table
  ``campusguard_alerts_schema`` (`schema.migrate_alerts`, under an advisory lock of its own);
- a sender claims a message with ``SELECT ... FOR UPDATE SKIP LOCKED`` in a transaction held while
  it sends, and deletes it in that transaction: two nodes never send one message, and a node
  killed mid-send releases it (its session ends) to another.

`campusguard.app.alerts.spec.SinkContext` picks these or the SQLite files; the sinks do not know
which they got. A sub-package, so the sink registry's discovery (which imports every module of
`campusguard.app.alerts`) never imports psycopg.
"""

"""Evidence a campus can hand over: signed case bundles anyone can verify, incident and shift reports.

Modules (this package's ``__init__`` imports none of them, so `verify` stays light):
    `bundle`: the bundle format, its signature and `verify_bundle` (the standard library and
        ``cryptography`` only: a recipient needs no server, database, network nor console extra).
    `keys`: the site's Ed25519 evidence key, made at first use (file ``0600`` beside the event store).
    `export`: `export_case`: incidents with their media, history, audit entries, config and
        camera facts into one signed ZIP; exported incidents are kept (legal hold).
    `report`: the incident report and the shift handover report (HTML, and PDF with ReportLab).
"""

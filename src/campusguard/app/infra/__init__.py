"""Small infrastructure the app's stages share: durable file writes, SQLite helpers, back-off, and
rate-limited logging. Nothing here knows about cameras, rules or events."""

// Versioned schema migrations, applied in order at start (PRAGMA user_version = how many ran).
// Never edit a released migration: append a new one.

export const MIGRATIONS: string[] = [
  /* 1: the whole first schema */ `
  CREATE TABLE orgs (
    org_id      TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL
  );

  CREATE TABLE api_tokens (
    token_id    TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES orgs(org_id) ON DELETE CASCADE,
    name        TEXT,
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
  );

  CREATE TABLE webhooks (
    webhook_id      TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL REFERENCES orgs(org_id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    secret          TEXT,
    interests       TEXT,           -- JSON document as given; NULL = legacy = {"all_events": true}
    match           TEXT,           -- JSON document (ids deduplicated and sorted); NULL = org-wide
    match_canonical TEXT NOT NULL,  -- '' for org-wide
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
  );
  CREATE UNIQUE INDEX webhooks_unique ON webhooks(org_id, url, match_canonical);
  CREATE INDEX webhooks_org ON webhooks(org_id);

  CREATE TABLE apps (
    app_id      TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES orgs(org_id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL
  );

  CREATE TABLE app_configs (
    app_config_id TEXT PRIMARY KEY,
    app_id        TEXT NOT NULL REFERENCES apps(app_id) ON DELETE CASCADE,
    org_id        TEXT NOT NULL,
    version       INTEGER NOT NULL,
    body          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (app_id, version)
  );

  CREATE TABLE app_branches (
    app_branch_id TEXT PRIMARY KEY,
    app_id        TEXT NOT NULL REFERENCES apps(app_id) ON DELETE CASCADE,
    org_id        TEXT NOT NULL,
    name          TEXT NOT NULL,
    install_groups TEXT NOT NULL,
    created_at    TEXT NOT NULL
  );

  CREATE TABLE installs (
    install_id    TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL REFERENCES orgs(org_id) ON DELETE CASCADE,
    app_id        TEXT NOT NULL REFERENCES apps(app_id),
    name          TEXT NOT NULL,
    labels        TEXT NOT NULL,
    app_config_id TEXT REFERENCES app_configs(app_config_id),
    app_branch_id TEXT,
    sandbox_id    TEXT NOT NULL,
    runner_id     TEXT NOT NULL,
    inputs        TEXT NOT NULL DEFAULT '{}',
    provisioned   INTEGER NOT NULL DEFAULT 0,
    health_state  TEXT NOT NULL DEFAULT 'ok',
    health_ctx    TEXT NOT NULL DEFAULT '{"verdicts":{}}',
    created_at    TEXT NOT NULL
  );
  CREATE INDEX installs_org ON installs(org_id);

  CREATE TABLE install_components (
    component_id TEXT PRIMARY KEY,
    install_id   TEXT NOT NULL REFERENCES installs(install_id) ON DELETE CASCADE,
    org_id       TEXT NOT NULL,
    name         TEXT NOT NULL,
    labels       TEXT NOT NULL,
    position     INTEGER NOT NULL,
    active       INTEGER NOT NULL,
    health_state TEXT NOT NULL DEFAULT 'ok',
    health_ctx   TEXT NOT NULL DEFAULT '{"verdict":null}',
    UNIQUE (install_id, name)
  );

  CREATE TABLE install_actions (
    action_id   TEXT PRIMARY KEY,
    install_id  TEXT NOT NULL REFERENCES installs(install_id) ON DELETE CASCADE,
    org_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    labels      TEXT NOT NULL,
    inputs      TEXT NOT NULL,
    position    INTEGER NOT NULL,
    active      INTEGER NOT NULL,
    UNIQUE (install_id, name)
  );

  CREATE TABLE runners (
    runner_id   TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES orgs(org_id) ON DELETE CASCADE,
    install_id  TEXT,
    name        TEXT NOT NULL,
    group_id    TEXT NOT NULL,
    group_type  TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending',
    ctx         TEXT NOT NULL DEFAULT '{"heartbeatSinceCheck":false,"lastProcess":null}',
    created_at  TEXT NOT NULL
  );

  CREATE TABLE workflows (
    workflow_id TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL,
    type        TEXT NOT NULL,
    owner_id    TEXT NOT NULL,
    owner_type  TEXT NOT NULL,
    parent      TEXT,
    action_id   TEXT,
    external    INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL,
    error       TEXT,
    params      TEXT NOT NULL DEFAULT '{}',
    started_at  TEXT,
    finished_at TEXT,
    created_at  TEXT NOT NULL
  );
  CREATE INDEX workflows_owner ON workflows(org_id, owner_id);

  CREATE TABLE steps (
    step_id        TEXT NOT NULL,
    workflow_id    TEXT NOT NULL REFERENCES workflows(workflow_id) ON DELETE CASCADE,
    org_id         TEXT NOT NULL,
    idx            INTEGER NOT NULL,
    name           TEXT NOT NULL,
    target_type    TEXT,
    target_id      TEXT,
    component_id   TEXT,
    sandbox_id     TEXT,
    execution_type TEXT NOT NULL,
    operation      TEXT,
    status         TEXT NOT NULL,
    error          TEXT,
    plan           TEXT,
    approval       TEXT,
    params         TEXT NOT NULL DEFAULT '{}',
    started_at     TEXT,
    finished_at    TEXT,
    PRIMARY KEY (workflow_id, step_id)
  );

  CREATE TABLE jobs (
    job_id      TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL,
    runner_id   TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    step_id     TEXT NOT NULL,
    payload     TEXT NOT NULL,
    status      TEXT NOT NULL,
    sent_at     TEXT,
    created_at  TEXT NOT NULL
  );
  CREATE INDEX jobs_status ON jobs(status);

  CREATE TABLE app_config_versions (
    version_id        TEXT PRIMARY KEY,
    install_id        TEXT NOT NULL REFERENCES installs(install_id) ON DELETE CASCADE,
    org_id            TEXT NOT NULL,
    version           INTEGER NOT NULL,
    app_config_id     TEXT NOT NULL,
    old_app_config_id TEXT,
    workflow_id       TEXT,
    status            TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    UNIQUE (install_id, version)
  );

  CREATE TABLE outbox (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id   TEXT NOT NULL UNIQUE,
    org_id     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    type       TEXT NOT NULL,
    body       TEXT NOT NULL,
    published  INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
  );
  CREATE INDEX outbox_unpublished ON outbox(published, seq);

  CREATE TABLE sessions (
    session_id  TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES orgs(org_id) ON DELETE CASCADE,
    csrf        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
  );

  `,
  /* 2: a dashboard session remembers the API token it signed in with, so revoking ends it */ `
  ALTER TABLE sessions ADD COLUMN token_id TEXT;
  CREATE INDEX sessions_token ON sessions(token_id);
  `,
  /* 3: secret rotation with an overlap, delivery status per webhook, the outbox as the embedded
        delivery queue (route beside the body, per-webhook progress), settings (the data plane key) */ `
  ALTER TABLE webhooks ADD COLUMN previous_secret TEXT;
  ALTER TABLE webhooks ADD COLUMN previous_secret_expires_at TEXT;

  CREATE TABLE webhook_delivery_status (
    webhook_id           TEXT PRIMARY KEY REFERENCES webhooks(webhook_id) ON DELETE CASCADE,
    org_id               TEXT NOT NULL,
    last_attempt_at      TEXT,
    last_outcome         TEXT,
    last_status_code     INTEGER,
    last_error           TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    attempts_total       INTEGER NOT NULL DEFAULT 0,
    failures_total       INTEGER NOT NULL DEFAULT 0
  );

  ALTER TABLE outbox ADD COLUMN route TEXT;
  ALTER TABLE outbox ADD COLUMN progress TEXT;

  CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
  );
  `,
  /* 4: steps awaiting approval per org (the dashboard's approvals page and navigation count on
        every page): a partial index, as small as the number of waiting steps */ `
  CREATE INDEX steps_awaiting_approval ON steps(org_id) WHERE status = 'awaiting_approval';
  `,
  /* 5: dead letters (CONTRACT 8): an outbox row or a registry entry the bus cannot carry, set aside
        with its reason instead of retried in front of everything behind it */ `
  CREATE TABLE dead_letters (
    id         TEXT PRIMARY KEY,  -- the event id; for a registry entry <webhook id>@<digest of the entry>
    kind       TEXT NOT NULL,     -- 'event' | 'registry'
    org_id     TEXT NOT NULL,
    item_id    TEXT NOT NULL,     -- the event id or the webhook id
    reason     TEXT NOT NULL,
    data       TEXT NOT NULL,     -- JSON: the outbox row (subject, type, body, route), or the entry without its secrets
    created_at TEXT NOT NULL
  );
  CREATE INDEX dead_letters_org ON dead_letters(org_id, created_at);
  `,
  /* 6: event history, the attempt log and recoveries (CONTRACT 4.5), kept for --event-retention:
        every event the engine emits (written with its outbox row), every attempt's outcome
        (written in batches with the delivery status), and each recovery's progress */ `
  CREATE TABLE events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,  -- the cursor of GET /v1/events
    event_id   TEXT NOT NULL UNIQUE,
    org_id     TEXT NOT NULL,
    type       TEXT NOT NULL,
    subject    TEXT NOT NULL,     -- the CloudEvents subject
    body       TEXT NOT NULL,     -- the CloudEvent exactly as delivered
    route      TEXT NOT NULL,     -- its route (src/domain/event-route.ts), to match it again at a recovery
    created_ms INTEGER NOT NULL   -- when emitted (the engine's clock)
  );
  CREATE INDEX events_org ON events(org_id, seq);
  CREATE INDEX events_org_time ON events(org_id, created_ms);
  CREATE INDEX events_time ON events(created_ms);

  CREATE TABLE delivery_attempts (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,  -- the cursor of GET …/attempts
    webhook_id   TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    type         TEXT NOT NULL,
    attempted_ms INTEGER NOT NULL,
    ok           INTEGER NOT NULL,
    status_code  INTEGER,
    error        TEXT,
    duration_ms  INTEGER NOT NULL,
    recovery_id  TEXT,              -- a recovery's id, 'resend', or NULL for the automatic attempt
    kept_ms      INTEGER NOT NULL   -- when recorded (the engine's clock): retention counts from it
  );
  CREATE INDEX delivery_attempts_webhook ON delivery_attempts(webhook_id, seq);
  CREATE INDEX delivery_attempts_event ON delivery_attempts(webhook_id, event_id);
  CREATE INDEX delivery_attempts_kept ON delivery_attempts(kept_ms);

  CREATE TABLE recoveries (
    recovery_id TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL,
    webhook_id  TEXT NOT NULL,
    events      INTEGER NOT NULL,
    attempted   INTEGER NOT NULL DEFAULT 0,
    succeeded   INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    prepared    INTEGER NOT NULL DEFAULT 0,  -- 1 once every item of it is queued (events is final)
    created_ms  INTEGER NOT NULL
  );
  CREATE INDEX recoveries_time ON recoveries(created_ms);
  `,
  /* 7: a vetoed app config (CONTRACT 4.3: applying it is 409 vetoed), and the reason of each
        component's last known verdict (a health gate names it when a verdict is already bad) */ `
  ALTER TABLE app_configs ADD COLUMN vetoed_reason TEXT;
  ALTER TABLE app_configs ADD COLUMN vetoed_at TEXT;
  ALTER TABLE install_components ADD COLUMN health_reason TEXT;
  CREATE INDEX steps_baking ON steps(org_id) WHERE status = 'started' AND json_extract(params, '$.kind') = 'bake';
  `,
  /* 8: external workflow ids are scoped by org (CONTRACT 6.7): a producer's workflow keeps the id it
        reported (external_id, unique per org) whatever id it is stored under */ `
  ALTER TABLE workflows ADD COLUMN external_id TEXT;
  UPDATE workflows SET external_id = workflow_id WHERE external = 1;
  CREATE UNIQUE INDEX workflows_external_id ON workflows(org_id, external_id) WHERE external_id IS NOT NULL;
  `,
  /* 9: NATS mode publishes the outbox in batches, one JetStream message each (src/bus/hop.ts): a
        row's batch is fixed when it is committed, so that after a crash the same rows make the
        same message (its id = the batch id, a JetStream duplicate if it was stored already) */ `
  ALTER TABLE outbox ADD COLUMN batch TEXT;
  `,
  /* recoveries are paced work (CONTRACT 4.5 bounds): a recovery keeps its window and a durable
        cursor over the history; the items found and not yet queued wait in recovery_items (fed
        into the outbox a few at a time as the webhook's attempts come back); a webhook remembers
        the newest event when it was created (recover without backfill starts after it) */ `
  ALTER TABLE recoveries ADD COLUMN since_ms INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE recoveries ADD COLUMN until_ms INTEGER;
  ALTER TABLE recoveries ADD COLUMN only_failed INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE recoveries ADD COLUMN backfill INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE recoveries ADD COLUMN from_seq INTEGER NOT NULL DEFAULT 0;   -- events after it (the webhook's creation, or 0 with backfill)
  ALTER TABLE recoveries ADD COLUMN to_seq INTEGER NOT NULL DEFAULT 0;     -- the newest event when it was asked for
  ALTER TABLE recoveries ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;        -- the registry revision when it was asked for
  ALTER TABLE recoveries ADD COLUMN subscription TEXT;                     -- {interests, match} when it was asked for
  ALTER TABLE recoveries ADD COLUMN scanned_seq INTEGER NOT NULL DEFAULT 0; -- the cursor: events up to it are looked at
  ALTER TABLE recoveries ADD COLUMN fed INTEGER NOT NULL DEFAULT 0;        -- items queued in the outbox so far
  ALTER TABLE recoveries ADD COLUMN finished_ms INTEGER;                   -- NULL while running
  UPDATE recoveries SET prepared = 1, fed = events, finished_ms = created_ms;
  CREATE INDEX recoveries_running ON recoveries(org_id, webhook_id) WHERE finished_ms IS NULL;
  CREATE TABLE recovery_items (
    recovery_id TEXT NOT NULL,
    event_seq   INTEGER NOT NULL,
    PRIMARY KEY (recovery_id, event_seq)
  ) WITHOUT ROWID;
  ALTER TABLE webhooks ADD COLUMN created_seq INTEGER NOT NULL DEFAULT 0;
  UPDATE webhooks SET created_seq = (SELECT COALESCE(MAX(e.seq), 0) FROM events e
    WHERE e.created_ms < CAST((julianday(webhooks.created_at) - 2440587.5) * 86400000 AS INTEGER));
  `,
  /* embedded mode's outbox source reads the outbox per org, round robin (CONTRACT 8: one org's backlog
        waits in the outbox while another org's events are handed over): an org's rows in order */ `
  CREATE INDEX IF NOT EXISTS outbox_org ON outbox(org_id, seq);
  `,
  /* the delivery watchdog (CONTRACT 4.1, new in 0.2): a webhook's opt-in disable_after
        ({failures, duration} as given), its watchdog machine's state and context (written by the
        engine with the events they emit); the delivery status's streak (written with it) */ `
  ALTER TABLE webhooks ADD COLUMN disable_after TEXT;
  ALTER TABLE webhooks ADD COLUMN watch_state TEXT NOT NULL DEFAULT 'active';
  ALTER TABLE webhooks ADD COLUMN watch_ctx TEXT;
  ALTER TABLE webhook_delivery_status ADD COLUMN failing_since TEXT;
  ALTER TABLE webhook_delivery_status ADD COLUMN recover_since TEXT;
  ALTER TABLE webhook_delivery_status ADD COLUMN failed_events INTEGER NOT NULL DEFAULT 0;
  `,
  /* scopes and the audit log (CONTRACT 2 "Scopes and actors"): every token has a scope (tokens made
        before scopes are admin); every write through /v1 or the dashboard, and the database
        commands' changes, are kept with their actor, written in the transaction of the change */ `
  ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'admin';
  CREATE TABLE audit_log (
    org_id        TEXT NOT NULL,
    seq           INTEGER NOT NULL,  -- per org: 1, 2, 3 … in write order (an org's pages read one b-tree range)
    audit_id      TEXT NOT NULL,     -- random: the id the API shows (no count in it)
    at            TEXT NOT NULL,     -- ISO 8601, the engine's clock
    at_ms         INTEGER NOT NULL,  -- the same, for filters and the retention prune
    token_id      TEXT,              -- NULL: the database commands (token_name 'local')
    token_name    TEXT,
    action        TEXT NOT NULL,
    resource_type TEXT,
    resource_id   TEXT,
    status        INTEGER,           -- the HTTP status answered; NULL for the database commands
    PRIMARY KEY (org_id, seq)
  ) WITHOUT ROWID;                   -- one b-tree, no index: a write pays for one page (issue 31 measured it)
  `,
  /* change windows (CONTRACT 4.3 "Change windows", new in 0.2): per app, allow or deny, days,
        local start, duration (as given, and in ms), IANA time zone, the installs selected (ids or
        labels; NULL: not given) and the run kinds it applies to (NULL: branch runs); and the
        started wait steps (`wait for change window: …`) the engine's clock looks at */ `
  CREATE TABLE change_windows (
    window_id   TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL,
    app_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    days        TEXT NOT NULL,
    start       TEXT NOT NULL,
    duration    TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    time_zone   TEXT NOT NULL,
    install_ids TEXT,
    selector    TEXT,
    applies_to  TEXT,
    created_at  TEXT NOT NULL
  );
  CREATE INDEX change_windows_app ON change_windows(app_id, created_at);
  CREATE INDEX steps_window_wait ON steps(org_id) WHERE status = 'started' AND json_extract(params, '$.kind') = 'window';
  `,
  /* fewer pages per outbox row (issue 33): a row was kept in four b-trees, two of them of no use
        (outbox_unpublished, on a column nothing reads since rows are deleted once published; the
        UNIQUE event_id, whose ids are unique by construction, UUID v7); each cost a page write at
        the insert and another at the delete. Rebuilt without them; its seq goes on from where it was */ `
  DROP INDEX IF EXISTS outbox_unpublished;
  CREATE TABLE outbox_rebuilt (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id   TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    type       TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    route      TEXT,
    progress   TEXT,
    batch      TEXT
  );
  INSERT INTO outbox_rebuilt (seq, event_id, org_id, subject, type, body, created_at, route, progress, batch)
    SELECT seq, event_id, org_id, subject, type, body, created_at, route, progress, batch FROM outbox ORDER BY seq;
  DELETE FROM sqlite_sequence WHERE name = 'outbox_rebuilt';
  INSERT INTO sqlite_sequence (name, seq) SELECT 'outbox_rebuilt', seq FROM sqlite_sequence WHERE name = 'outbox';
  DROP TABLE outbox;
  ALTER TABLE outbox_rebuilt RENAME TO outbox;
  CREATE INDEX outbox_org ON outbox(org_id, seq);
  `,
  /* the event history and the attempt log are pruned by seq (their times grow with it: found by
        bisection, store/history.ts pruneHistory), not through an index on their time, which cost
        every event and every attempt a page write (issue 33) */ `
  DROP INDEX IF EXISTS events_time;
  DROP INDEX IF EXISTS delivery_attempts_kept;
  `,
  /* NATS mode with a history: an emitted event's history row is its queue row too (issue 33: one
        row per event, not a history row and an outbox row with the body twice). events.batch is the
        hop batch the row is published in (NULL: not queued here, but in the outbox); relay_cursor
        the last seq of events JetStream has stored. Every event kept so far was queued in the outbox */ `
  ALTER TABLE events ADD COLUMN batch TEXT;
  CREATE TABLE relay_cursor (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    events_seq INTEGER NOT NULL
  );
  INSERT INTO relay_cursor (id, events_seq) SELECT 1, COALESCE(MAX(seq), 0) FROM events;
  `,
  /* the attempt log looks attempts up by event through an index on the event id alone (issue 33):
        event ids begin with their time, so each attempt appends at the index's end, where
        (webhook_id, event_id) inserted at one place per webhook, with the webhook id in every entry */ `
  DROP INDEX IF EXISTS delivery_attempts_event;
  CREATE INDEX delivery_attempts_event_id ON delivery_attempts(event_id);
  `,
  /* an org's events in a window of time are read by seq, between bounds found by bisection on the
        events' times (store/history.ts eventSeqsBetween), not through an index on (org, time), which
        cost every event an index entry and its page write (issue 33) */ `
  DROP INDEX IF EXISTS events_org_time;
  `,
  /* a producer's workflow stored under the id it reported (external_id = workflow_id, nearly every
        one) is found through the primary key: the index on (org, external id) holds only those
        stored under an id of their own (that id was another org's), so that a new workflow writes
        one id index, not two copies of the same key, each a page at its own place (issue 33) */ `
  DROP INDEX IF EXISTS workflows_external_id;
  CREATE UNIQUE INDEX workflows_external_id_renamed ON workflows(org_id, external_id)
    WHERE external_id IS NOT NULL AND external_id <> workflow_id;
  `,
  /* each attempt keeps what it sent and what the receiver answered (CONTRACT 4.5, new in 0.3): one
        JSON text {request: {headers}, response: {status, headers, body, body_truncated, ...}},
        at most about 13 KiB (src/delivery/exchange-record.ts); NULL for the attempts kept before.
        Pruned with its attempt row */ `
  ALTER TABLE delivery_attempts ADD COLUMN exchange TEXT;
  `,
  /* a webhook's payload filter (CONTRACT 10.2, issue 54): the JSON document as given, NULL for none */ `
  ALTER TABLE webhooks ADD COLUMN filter TEXT;
  `,
  /* approval policies (CONTRACT 10.4, new in 0.3): an app's policy (one JSON document, defaults
        filled in), and one-time approval links, each bound to a step and a token, of which only a
        SHA-256 hash of the secret is kept; used_at set once, when its one response is taken */ `
  CREATE TABLE app_approval_policies (
    app_id      TEXT PRIMARY KEY REFERENCES apps(app_id) ON DELETE CASCADE,
    org_id      TEXT NOT NULL,
    policy      TEXT NOT NULL,
    updated_at  TEXT NOT NULL
  );
  CREATE TABLE approval_links (
    link_id     TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    step_id     TEXT NOT NULL,
    token_id    TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    expires_at  TEXT NOT NULL,
    used_at     TEXT,
    created_at  TEXT NOT NULL
  );
  `,
  /* ordering (CONTRACT 10.1, new in 0.3): every event's sequence per (org, ordering key), the last
        one given in order_sequences (taken in the transaction that emits the event, so a key's
        sequences follow commit order and survive any restart); the history keeps each event's key
        and sequence, indexed, for GET /v1/events?order_key= and a recovery of a gap (a
        recovery of a gap keeps its key and window of sequences). Events kept before have neither.
        A webhook's opt-in `delivery` ({"ordering": "per_key"}; NULL: no order) */ `
  CREATE TABLE order_sequences (
    org_id    TEXT NOT NULL,
    order_key TEXT NOT NULL,
    sequence  INTEGER NOT NULL,
    PRIMARY KEY (org_id, order_key)
  ) WITHOUT ROWID;
  ALTER TABLE events ADD COLUMN order_key TEXT;
  ALTER TABLE events ADD COLUMN sequence INTEGER;
  CREATE INDEX events_order_key ON events(org_id, order_key, sequence) WHERE order_key IS NOT NULL;
  ALTER TABLE recoveries ADD COLUMN order_key TEXT;
  ALTER TABLE recoveries ADD COLUMN after_sequence INTEGER;
  ALTER TABLE recoveries ADD COLUMN until_sequence INTEGER;
  ALTER TABLE webhooks ADD COLUMN delivery TEXT;
  `,
  /* a webhook matches only events emitted once it exists: the registry version it was created at
        (the events it is too new for carry an older one, src/dispatch/registry.ts). Webhooks from
        before have 0: they match whatever is still queued, as they did. */ `
  ALTER TABLE webhooks ADD COLUMN since_rev INTEGER NOT NULL DEFAULT 0;
  `,
  /* durable ingest (CONTRACT 9, new in 0.3, NATS mode): how far the engine applied the SVC_FACTS
        stream, written in the commit that applies the facts. The row of org '' is the watermark: every
        fact up to its seq is applied. An org's row: its last fact applied, when it is past the
        watermark (facts are applied fairly between orgs, not in stream order across them). */ `
  CREATE TABLE fact_cursors (
    org_id TEXT PRIMARY KEY,
    seq    INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  /* late refusals of durable ingest (CONTRACT 9, new in 0.3): a fact the gate stored that the engine
        refused when it applied it, kept per org for GET /v1/ingest/rejections (newest first: by seq),
        pruned with --event-retention (on received_at) and to the newest 10,000 of each org; each org's
        row count is kept beside them, in the same transactions, so that the cap costs what it deletes.
        No foreign key to orgs: a refusal is written in the engine's transaction, which it must not fail */ `
  CREATE TABLE ingest_rejections (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    received_at INTEGER NOT NULL,   -- ms epoch: when the gate received the fact
    error       TEXT NOT NULL,
    fact        TEXT NOT NULL       -- the message body as received (UTF-8)
  );
  CREATE INDEX ingest_rejections_org ON ingest_rejections(org_id, seq);
  CREATE INDEX ingest_rejections_received ON ingest_rejections(received_at);
  CREATE TABLE ingest_rejection_counts (
    org_id TEXT PRIMARY KEY,
    n      INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
];

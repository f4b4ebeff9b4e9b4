-- Access requests (elevation to a role, or approval of one item) and
-- their reviews. Times are milliseconds since the Unix epoch, taken from
-- the store's own clock.
CREATE TABLE access_requests (
    id               TEXT    PRIMARY KEY,
    kind             TEXT    NOT NULL,
    requester        TEXT    NOT NULL,
    role             TEXT    NOT NULL,
    targets          TEXT,
    reason           TEXT,
    item             TEXT,
    duration_ms      BIGINT  NOT NULL,
    approvals_needed BIGINT  NOT NULL,
    state            TEXT    NOT NULL,
    created_ms       BIGINT  NOT NULL,
    decided_ms       BIGINT,
    expires_ms       BIGINT,
    used_ms          BIGINT,
    ended_by         TEXT
);
CREATE INDEX access_requests_requester ON access_requests (requester, state);
CREATE INDEX access_requests_state ON access_requests (state, expires_ms);

CREATE TABLE access_reviews (
    request_id TEXT   NOT NULL REFERENCES access_requests (id),
    reviewer   TEXT   NOT NULL,
    verdict    TEXT   NOT NULL,
    comment    TEXT,
    at_ms      BIGINT NOT NULL,
    PRIMARY KEY (request_id, reviewer)
);

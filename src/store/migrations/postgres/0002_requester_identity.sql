-- Requesters are kept by identity (method, issuer and name: `basic:alice`)
-- in `requester`, so a bearer token whose subject is alice holds nothing
-- of Basic alice's; `requester_name` is the name shown. Requests made
-- before this keep their bare name as `requester`, which no identity
-- matches: they are no one's to hold, use or revoke, and expire.
ALTER TABLE access_requests ADD COLUMN requester_name TEXT;

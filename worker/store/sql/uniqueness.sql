-- Uniqueness windows and debounce (migration 0081, worker/jobs/uniqueness.py, the only
-- caller): an enqueue with a unique key decides, under the key's row lock, whether it
-- folds into the key's job, replaces that job's payload, or creates a job.

-- name: unique_keys_lock
-- Lock each key's row (created when new), in key order so two enqueues of several keys
-- never wait on each other in a cycle; the lock holds until the caller's transaction
-- ends. ON CONFLICT waits for a concurrent enqueuer of the key to commit or roll back and
-- returns the row as it then stands. The holder's state is read by unique_key_holders,
-- a statement of its own: this one's snapshot predates that wait.
INSERT INTO job_unique_keys AS k (key)
SELECT key FROM unnest(%(keys)s::text[]) AS key ORDER BY key
ON CONFLICT (key) DO UPDATE SET key = k.key
RETURNING k.key, k.job_id, k.held_until > now() AS in_window

-- name: unique_key_holders
-- The keys' jobs as they stand now (READ COMMITTED: the holder a waited-for enqueue
-- committed is seen): whether each is live, and whether it may still take a new payload
-- (pending and never started).
SELECT id, status IN ('pending', 'running') AS live,
       status = 'pending' AND started_at IS NULL AS replaceable
FROM background_jobs WHERE id = ANY(%(ids)s::bigint[])

-- name: unique_replace_pending
-- Debounce: give not yet started pending jobs a newer enqueue's payload, version, run
-- time and deadline. A compare-and-set on the state: a job a claim took meanwhile (the
-- UPDATE waits for the claim's commit and re-reads the row) is not changed, and is not
-- returned; the caller then creates a job. A job this has changed stays locked until
-- the caller commits, and the claims skip it until then.
UPDATE background_jobs j
SET payload = r.payload, version = r.version,
    available_at = COALESCE(r.run_at, now() + make_interval(secs => COALESCE(r.delay, 0))),
    expires_at = COALESCE(r.expires_at, COALESCE(r.run_at, now() + make_interval(
                     secs => COALESCE(r.delay, 0))) + make_interval(secs => r.expires_after))
FROM ROWS FROM (unnest(%(ids)s::bigint[]), jsonb_array_elements(%(payloads)s::jsonb),
                unnest(%(versions)s::int[]), unnest(%(run_ats)s::timestamptz[]),
                unnest(%(delays)s::float8[]), unnest(%(expires_ats)s::timestamptz[]),
                unnest(%(expires_afters)s::float8[]))
     AS r(id, payload, version, run_at, delay, expires_at, expires_after)
WHERE j.id = r.id AND j.status = 'pending' AND j.started_at IS NULL
RETURNING j.id

-- name: unique_keys_hold
-- The keys' new jobs, enqueued now, each holding its key for its window (NULL: none).
UPDATE job_unique_keys k
SET job_id = r.job_id, enqueued_at = now(),
    held_until = now() + make_interval(secs => r.window_s)
FROM unnest(%(keys)s::text[], %(job_ids)s::bigint[], %(windows)s::float8[])
     AS r(key, job_id, window_s)
WHERE k.key = r.key

-- name: unique_folds_record
-- One row per enqueue folded into an existing job (the job page's count), by a unique key
-- or by a live job's idempotency key (worker/jobs/enqueue.py).
INSERT INTO job_folds (job_id, replaced)
SELECT * FROM unnest(%(job_ids)s::bigint[], %(replaced)s::bool[])

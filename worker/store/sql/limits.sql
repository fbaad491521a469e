-- Rate limits and live limits (worker/engine/limits.py, worker/ops/operations.py): the
-- claim's scope locks, the operators' controls, the token buckets' upkeep.

-- name: limits_lock
-- Serialize the limited claims of these scopes ('type:<t>', 'queue:<q>') across workers
-- until the claim's transaction ends: transaction-level advisory locks (released at commit,
-- so they hold through a transaction-pooling PgBouncer too), taken in one order (by lock
-- key) so two claims of overlapping scopes never wait for each other in a cycle. The
-- claim_jobs that follows gets a snapshot taken after the locks, so it sees the tokens
-- and running jobs every earlier claim of these scopes committed. The two-key form keeps
-- these locks apart from the single-key locks other duties take.
-- Bounded, so that one frozen worker (SIGSTOP, a GC pause, a paused VM) cannot stop a
-- limit on every worker: first, for this transaction only, the longest wait for the locks
-- (`lock_wait`, after which this claim gives up for now) and the longest idle time inside
-- it (`idle`, after which the server ends the session: its locks go, its claim rolls back).
-- The lateral dependency makes the settings precede the locks.
SELECT count(*) AS locked
FROM (SELECT set_config('lock_timeout', %(lock_wait)s::text, true) AS lock_wait,
             set_config('idle_in_transaction_session_timeout', %(idle)s::text, true)
                 AS idle) AS bounded
CROSS JOIN LATERAL (
    SELECT pg_advisory_xact_lock(20563, x.key)
    FROM (SELECT DISTINCT hashtext(s) AS key FROM unnest(%(scopes)s::text[]) AS s
          WHERE bounded.lock_wait IS NOT NULL AND bounded.idle IS NOT NULL
          ORDER BY 1 OFFSET 0) AS x) AS taken;

-- name: limits_waiting
-- Whether a job of the limited types or queues is pending and due: the producer then
-- claims again as the buckets refill rather than at its poll interval.
SELECT EXISTS (
    SELECT 1 FROM background_jobs j
    WHERE j.status = 'pending' AND j.available_at <= now()
      AND (j.type = ANY(%(types)s::text[]) OR j.queue = ANY(%(queues)s::text[]))
) AS waiting;

-- name: limit_controls_list
-- Every live limit an operator set, with who set it, when and why.
SELECT scope, name, max_concurrency, rate, burst, reason, set_by, set_role, set_at
FROM job_limit_controls ORDER BY scope, name;

-- name: limits_prune_buckets
-- Delete buckets idle for a minute and for twice their window (burst / rate seconds, by
-- the rate and burst they were last spent with): every start they hold has left the
-- window, and a missing bucket reads as full, so nothing changes but the table's size
-- (one row per key of a per-key limit would otherwise stay for ever).
DELETE FROM job_rate_buckets
WHERE updated_at < now() - interval '1 minute'
  AND updated_at < now() - make_interval(secs => 2 * burst / rate);

-- name: operator_limit_set
-- Set a queue's or a type's live limit (maximum concurrency and/or rate per second, burst),
-- replacing an earlier one, audited in the same statement with what it replaced.
WITH previous AS (
    SELECT max_concurrency, rate, burst FROM job_limit_controls
    WHERE scope = %(scope)s::text AND name = %(name)s::text
), written AS (
    INSERT INTO job_limit_controls AS c
        (scope, name, max_concurrency, rate, burst, reason, set_by, set_role, set_at)
    VALUES (%(scope)s::text, %(name)s::text, %(max_concurrency)s::int, %(rate)s::float8,
            %(burst)s::float8, %(reason)s::text, %(actor)s::text, %(role)s::text, now())
    ON CONFLICT (scope, name) DO UPDATE
    SET max_concurrency = EXCLUDED.max_concurrency, rate = EXCLUDED.rate,
        burst = EXCLUDED.burst, reason = EXCLUDED.reason, set_by = EXCLUDED.set_by,
        set_role = EXCLUDED.set_role, set_at = now()
    RETURNING scope, name
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, request_id, details)
    SELECT %(actor)s::text, %(role)s::text, 'set_limit', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('limit', w.scope || ':' || w.name, 'scope', w.scope,
                              'name', w.name, 'max_concurrency', %(max_concurrency)s::int,
                              'rate', %(rate)s::float8, 'burst', %(burst)s::float8,
                              'previous', (SELECT to_jsonb(p) FROM previous p))
    FROM written w
    RETURNING id
)
SELECT (SELECT count(*) FROM audit) AS changed;

-- name: operator_limit_clear
-- Clear a queue's or a type's live limit (the declared one holds again), audited in the
-- same statement with what it cleared; no live limit: nothing changes, nothing audited.
WITH cleared AS (
    DELETE FROM job_limit_controls
    WHERE scope = %(scope)s::text AND name = %(name)s::text
    RETURNING scope, name, max_concurrency, rate, burst
), audit AS (
    INSERT INTO job_audit (actor, role, action, reason, request_id, details)
    SELECT %(actor)s::text, %(role)s::text, 'clear_limit', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('limit', c.scope || ':' || c.name, 'scope', c.scope,
                              'name', c.name,
                              'previous', jsonb_build_object(
                                  'max_concurrency', c.max_concurrency, 'rate', c.rate,
                                  'burst', c.burst))
    FROM cleared c
    RETURNING id
)
SELECT (SELECT count(*) FROM audit) AS changed;

-- Published job-type policies (worker/jobs/job_types.py is the only caller): the handler's
-- declaration, written by its workers, is what every other process goes by.

-- name: job_types_publish
-- Upsert the policies of a worker's job types; never over a newer version's policy.
INSERT INTO job_types
    (type, queue, max_attempts, timeout_seconds, lease_seconds, backoff, sla_seconds,
     version, repeat_safe, concurrency_limit, rate_limit, rate_burst, rate_limit_key,
     unique_for_seconds, replace, expires_after_seconds, fair_key, fair_weights, published_by)
SELECT r.type, r.queue, r.max_attempts, r.timeout_seconds, r.lease_seconds, r.backoff,
       r.sla_seconds, r.version, r.repeat_safe, r.concurrency_limit, r.rate_limit,
       r.rate_burst, r.rate_limit_key, r.unique_for_seconds, coalesce(r.replace, false),
       r.expires_after_seconds, r.fair_key, r.fair_weights, r.published_by
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(
    type text, queue text, max_attempts int, timeout_seconds float8, lease_seconds float8,
    backoff jsonb, sla_seconds float8, version int, repeat_safe boolean,
    concurrency_limit int, rate_limit float8, rate_burst float8, rate_limit_key text,
    unique_for_seconds float8, replace boolean, expires_after_seconds float8,
    fair_key text, fair_weights jsonb, published_by text)
ORDER BY r.type
ON CONFLICT (type) DO UPDATE
SET queue = EXCLUDED.queue, max_attempts = EXCLUDED.max_attempts,
    timeout_seconds = EXCLUDED.timeout_seconds, lease_seconds = EXCLUDED.lease_seconds,
    backoff = EXCLUDED.backoff, sla_seconds = EXCLUDED.sla_seconds,
    version = EXCLUDED.version, repeat_safe = EXCLUDED.repeat_safe,
    concurrency_limit = EXCLUDED.concurrency_limit, rate_limit = EXCLUDED.rate_limit,
    rate_burst = EXCLUDED.rate_burst, rate_limit_key = EXCLUDED.rate_limit_key,
    unique_for_seconds = EXCLUDED.unique_for_seconds, replace = EXCLUDED.replace,
    expires_after_seconds = EXCLUDED.expires_after_seconds,
    fair_key = EXCLUDED.fair_key, fair_weights = EXCLUDED.fair_weights,
    published_by = EXCLUDED.published_by, published_at = now()
-- During a rolling deploy a restarting old worker must not undo the new declaration.
WHERE job_types.version <= EXCLUDED.version
RETURNING type

-- name: job_types_get
-- The published policies of the given job types.
SELECT type, queue, max_attempts, timeout_seconds, lease_seconds, backoff, sla_seconds,
       version, repeat_safe, concurrency_limit, unique_for_seconds, replace,
       expires_after_seconds, fair_key, fair_weights
FROM job_types
WHERE type = ANY(%(types)s::text[])

-- name: job_types_adopt_defaulted
-- At most `batch` pending jobs of these types that took documented defaults take the
-- published policy, as if enqueued after it: a worker's duty, one short transaction per
-- batch, so the queue the console, the CLI and pauses read is the declared one without
-- a statement that rewrites every such job at once (a claim applies the policy by itself).
-- The partial index background_jobs_policy_defaults_idx holds exactly these jobs. Rows a
-- claim or another worker's batch holds are skipped; the UPDATE re-checks both states.
-- A type published with a fair key gives such a job its key, read from the payload as
-- enqueue_jobs reads it (until then the fair claim cannot see the job).
WITH batch AS (
    SELECT j.id FROM background_jobs j
    WHERE j.type = ANY(%(types)s::text[])
      AND j.status = 'pending'
      AND j.policy_defaults IS NOT NULL
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs j
SET queue = CASE WHEN 'queue' = ANY(j.policy_defaults) THEN t.queue ELSE j.queue END,
    max_attempts = CASE WHEN 'max_attempts' = ANY(j.policy_defaults)
                        THEN t.max_attempts ELSE j.max_attempts END,
    fair_key = CASE WHEN j.fair_key IS NOT NULL OR t.fair_key IS NULL THEN j.fair_key ELSE (
        SELECT CASE WHEN length(v.k) <= 200 THEN v.k
                    ELSE 'sha256:' || encode(sha256(convert_to(v.k, 'UTF8')), 'hex') END
        FROM (SELECT coalesce(j.payload #>> string_to_array(t.fair_key, '.'), '') AS k) AS v)
    END,
    policy_defaults = NULL
FROM batch b, job_types t
WHERE j.id = b.id
  AND t.type = j.type
  AND j.status = 'pending'
  AND j.policy_defaults IS NOT NULL
RETURNING j.id

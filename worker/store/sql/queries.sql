-- Queries of the job runtime: enqueue, claim, heartbeat, outcomes, recovery, workers.
-- Every transition out of `running` is a compare-and-set on (status, execution_id):
-- zero rows back means this execution no longer owns the job and must discard its result.

-- name: enqueue_jobs
-- Insert jobs from parallel arrays, one per column; a live job with the same idempotency key wins.
-- ROWS FROM zips the arrays, and its ordinality keeps the order given, so identity values
-- follow it. The payloads come as one JSON array (text arrays of JSON would escape every
-- quote). A field no job sets comes as a NULL array: ROWS FROM fills it with NULLs.
-- Typed arrays cost the database less per row than jsonb_to_recordset did.
-- `batch_id`: the batch every job of the call joins (NULL: none; batch_join counted them).
-- `trace_context`: the trace the call was made in (NULL: none), the same for every job.
-- A batch with no idempotency key runs it without the ON CONFLICT clause
-- (`enqueue_jobs_keyless`, worker/store/queries.py): keep that clause last but RETURNING.
-- A deadline is `expires_at`, or its type's `expires_after` seconds from the run time
-- (migration 0081); `unique_keys`: the unique key each job holds (worker/jobs/uniqueness.py).
-- `fair_paths`: each job's type's fair_key path (NULL: none, and so no fair key): the
-- key is that payload value, '' when the payload lacks it, and a value longer than 200
-- characters goes by its SHA-256 (the fair index's entries stay small; migration 0088).
INSERT INTO background_jobs
    (queue, type, version, payload, priority, available_at, max_attempts,
     idempotency_key, concurrency_key, policy_defaults, batch_id, expires_at, unique_key,
     trace_context, fair_key)
SELECT r.queue, r.type, r.version, r.payload, r.priority,
       COALESCE(r.run_at, now() + make_interval(secs => COALESCE(r.delay, 0))),
       r.max_attempts, r.idempotency_key, r.concurrency_key,
       string_to_array(r.policy_defaults, ','), %(batch_id)s::bigint,
       COALESCE(r.expires_at, COALESCE(r.run_at, now() + make_interval(
           secs => COALESCE(r.delay, 0))) + make_interval(secs => r.expires_after)),
       r.unique_key, %(trace_context)s::text,
       CASE WHEN r.fair_path IS NOT NULL THEN (
           SELECT CASE WHEN length(v.k) <= 200 THEN v.k
                       ELSE 'sha256:' || encode(sha256(convert_to(v.k, 'UTF8')), 'hex') END
           FROM (SELECT coalesce(r.payload #>> string_to_array(r.fair_path, '.'), '') AS k) AS v)
       END
FROM ROWS FROM (unnest(%(queues)s::text[]), unnest(%(types)s::text[]),
                unnest(%(versions)s::int[]), jsonb_array_elements(%(payloads)s::jsonb),
                unnest(%(priorities)s::int[]), unnest(%(run_ats)s::timestamptz[]),
                unnest(%(delays)s::float8[]), unnest(%(max_attempts)s::int[]),
                unnest(%(idempotency_keys)s::text[]), unnest(%(concurrency_keys)s::text[]),
                unnest(%(policy_defaults)s::text[]), unnest(%(expires_ats)s::timestamptz[]),
                unnest(%(expires_afters)s::float8[]), unnest(%(unique_keys)s::text[]),
                unnest(%(fair_paths)s::text[]))
     WITH ORDINALITY AS r(queue, type, version, payload, priority, run_at, delay,
                          max_attempts, idempotency_key, concurrency_key, policy_defaults,
                          expires_at, expires_after, unique_key, fair_path, ord)
ORDER BY r.ord
ON CONFLICT (idempotency_key)
    WHERE idempotency_key IS NOT NULL AND status IN ('pending', 'running')
    DO NOTHING
RETURNING id, idempotency_key

-- name: live_jobs_by_idempotency_key
-- The live jobs holding these idempotency keys (for enqueue's dedupe answer).
SELECT idempotency_key, id FROM background_jobs
WHERE idempotency_key = ANY(%(keys)s::text[]) AND status IN ('pending', 'running')

-- name: claim_jobs
-- Claim up to `limit` runnable jobs of the handled types, highest priority first. A job
-- with a concurrency_key starts only while fewer of its key's jobs run than its type's
-- limit (`policy`: each handled type's `limit`, `lease`, `queue` and `max_attempts`, an
-- object keyed by type, read by `->` where an array of each would need a lateral
-- `unnest` lookup, plan nodes that each claim sets up again), and takes a slot: the
-- smallest free number below that limit. The unique index on (concurrency_key,
-- concurrency_slot) of running jobs refuses a second claim of one slot (two workers
-- racing for a key's last one).
-- Of `queues` (NULL: any) and not of `skip_queues` (a `*` lane skips the capacity lanes').
-- A job that took the documented defaults (`policy_defaults`) is claimed as the worker's
-- own policy has it (the type's `queue` and `max_attempts` in `policy`): its queue
-- is the type's declared one for the lanes and pauses, and the claim stores both, so no
-- statement ever rewrites all such jobs at once (docs/architecture.md §5).
-- The plan must walk background_jobs_claim_rank_idx in its order and stop after `limit`
-- rows whatever the statistics say (the table may never have been analyzed). So `status` is
-- the only condition the planner can estimate; every other filter sits in a scalar
-- sub-select it can neither push into another index nor estimate as selective. With a
-- selective-looking filter (or a join on type) it walks the type index instead and sorts
-- every pending job of the type. The lease is read from `policy` for the same reason.
WITH locked AS (
    SELECT j.id, j.type, j.concurrency_key, j.priority, j.available_at
    FROM background_jobs j
    WHERE j.status = 'pending'
      AND (SELECT j.type = ANY(%(types)s::text[])
                  AND j.available_at <= now()
                  -- A job past its deadline is never started (the expiry duty ends it):
                  -- NULL for a job without one, which answers at the first test.
                  AND (j.expires_at IS NULL OR j.expires_at > now())
                  AND (%(queues)s::text[] IS NULL OR q.queue = ANY(%(queues)s::text[]))
                  AND (%(skip_queues)s::text[] IS NULL
                       OR q.queue <> ALL(%(skip_queues)s::text[]))
                  AND NOT EXISTS (SELECT 1 FROM queue_controls qc
                                  WHERE qc.queue = q.queue AND qc.paused)
                  AND (j.concurrency_key IS NULL OR (
                        SELECT count(*) FROM background_jobs r
                        WHERE r.concurrency_key = j.concurrency_key AND r.status = 'running')
                      < (%(policy)s::jsonb -> j.type ->> 'limit')::int)
           -- The queue the job is in for this claim: a defaulted one is the type's.
           FROM (SELECT CASE WHEN 'queue' = ANY(j.policy_defaults)
                             THEN %(policy)s::jsonb -> j.type ->> 'queue'
                             ELSE j.queue END AS queue) AS q)
    -- Priorities age: the rank is available_at moved 10 seconds earlier per priority
    -- level, so a waiting job overtakes higher priorities that became available more
    -- than 10 s per level after it. It never changes while the job waits: an index key.
    ORDER BY jobwarden_claim_rank(j.available_at, j.priority), j.id
    -- A limit the planner cannot read. Planned with its value (the first calls, before
    -- the server settles on a generic plan, and every call through a pooler that
    -- prepares nothing) it would compare 200 rows with its guess of the pending ones
    -- (one row in 200 without statistics) and, finding them alike, read and sort
    -- every pending job: 60-85 ms a claim on a 50,000-job backlog instead of 4-5.
    LIMIT (SELECT %(limit)s::int)
    FOR UPDATE OF j SKIP LOCKED
), keyed AS (
    -- The batch's jobs that have a key, numbered within their key in claim order, with
    -- their type's limit.
    SELECT l.id, l.type, l.concurrency_key,
           (%(policy)s::jsonb -> l.type ->> 'limit')::int AS lim, row_number() OVER (
               PARTITION BY l.concurrency_key
               ORDER BY jobwarden_claim_rank(l.available_at, l.priority), l.id) AS nth
    FROM locked l
    WHERE l.concurrency_key IS NOT NULL
), free_slots AS (
    -- Each key's free slots, numbered smallest first: its nth job takes the nth. Only
    -- the first (running + jobs in the batch) numbers can be among them.
    SELECT k.concurrency_key, s.slot,
           row_number() OVER (PARTITION BY k.concurrency_key ORDER BY s.slot) AS nth
    FROM (SELECT q.concurrency_key, max(q.lim) AS lim, count(*) AS jobs,
                 ARRAY(SELECT r.concurrency_slot FROM background_jobs r
                       WHERE r.concurrency_key = q.concurrency_key
                         AND r.status = 'running') AS taken
          FROM keyed q GROUP BY q.concurrency_key) AS k
    CROSS JOIN LATERAL generate_series(
        0, least(k.lim, cardinality(k.taken) + k.jobs) - 1) AS s(slot)
    WHERE s.slot <> ALL (k.taken)
), selected AS (
    -- Keyless jobs all; a keyed one only if its slot is below its type's limit (the
    -- others stay pending: their key has no room left).
    SELECT id, type, NULL::smallint AS slot FROM locked WHERE concurrency_key IS NULL
    UNION ALL
    SELECT q.id, q.type, f.slot::smallint
    FROM keyed q JOIN free_slots f USING (concurrency_key, nth)
    WHERE f.slot < q.lim
), claimed AS (
    UPDATE background_jobs j
    SET status = 'running',
        execution_id = gen_random_uuid(),
        attempts = j.attempts + 1,
        worker_id = %(worker_id)s,
        started_at = now(),
        heartbeat_at = now(),
        lease_seconds = p.lease,
        lease_expires_at = now() + make_interval(secs => p.lease),
        cancel_requested_at = NULL,
        concurrency_slot = coalesce(s.slot, 0),
        -- The fields that took defaults take the policy in the write the claim does
        -- anyway (a retry or a hand-back keeps them: the job is no longer defaulted).
        queue = CASE WHEN 'queue' = ANY(j.policy_defaults) THEN p.queue ELSE j.queue END,
        max_attempts = CASE WHEN 'max_attempts' = ANY(j.policy_defaults)
                            THEN p.max_attempts ELSE j.max_attempts END,
        policy_defaults = NULL
    -- A LIMIT that never cuts (the batch holds at most `limit` jobs) and whose value the
    -- planner cannot read: it guesses a tenth of its input, one row, so each job is
    -- found by one probe of the primary key whatever the plan's age. Without it the
    -- generic plan an idle worker's first claim makes, on a near-empty table, hashed the
    -- whole table, finished jobs included, at every claim until its plans were made
    -- again: 0.2-0.35 ms of a one-job claim once a few hundred jobs had finished
    -- (bench/bench_claim_lookup.py). Joined by id, a job a transaction changed and
    -- committed while this statement ran is still claimed (its newest version, locked).
    FROM (SELECT * FROM selected LIMIT (SELECT %(limit)s::int)) AS s
    CROSS JOIN LATERAL (
        SELECT (t.policy ->> 'lease')::float8 AS lease, t.policy ->> 'queue' AS queue,
               (t.policy ->> 'max_attempts')::int AS max_attempts
        FROM (SELECT %(policy)s::jsonb -> s.type AS policy) AS t) AS p
    WHERE j.id = s.id
    RETURNING j.id, j.queue, j.type, j.version, j.payload, j.priority, j.attempts,
              j.max_attempts, j.execution_id, j.checkpoint, j.idempotency_key, j.snoozes,
              j.concurrency_key, j.available_at, j.batch_id, j.trace_context
)
-- No job_executions row yet: a running execution lives on its job row (execution_id,
-- worker_id, started_at, heartbeat_at, the lease), and finish_executions writes its
-- history row once, when it ends (migration 0061; job_executions_all shows both).
SELECT id, queue, type, version, payload, priority, attempts, max_attempts,
       execution_id, checkpoint, idempotency_key, snoozes, concurrency_key,
       batch_id, trace_context
FROM claimed ORDER BY jobwarden_claim_rank(available_at, priority), id

-- name: claim_limited_jobs
-- claim_jobs for a lane's rate-limited and capped work (worker/engine/limits.py), its
-- text the same but for what limits add, so the plain claim pays for none of it
-- (tests/unit/test_claim_queries.py keeps the shared parts identical). The caller holds
-- the scopes' advisory locks (limits_lock) in the same transaction, so no other claim
-- spends the same tokens. The walk takes only limited work (the lane's plain claim takes
-- the rest) and steps over a job whose bucket (`rate_*`: its type's, or its type's for its key, and
-- its queue's) holds less than one token or whose type or queue runs `*_caps` jobs
-- already, so one key's backlog never hides the others; of the batch, a bucket's nth job
-- is taken only if the bucket holds n tokens and a cap's nth only if n jobs fit under it;
-- and the statement spends one token per job it claims (`spent`). A job left waiting
-- stays pending, its attempts untouched. Otherwise as claim_jobs:
-- Claim up to `limit` runnable jobs of the handled types, highest priority first. A job
-- with a concurrency_key starts only while fewer of its key's jobs run than its type's
-- limit (`policy`: each handled type's `limit`, `lease`, `queue` and `max_attempts`, an
-- object keyed by type, read by `->` where an array of each would need a lateral
-- `unnest` lookup, plan nodes that each claim sets up again), and takes a slot: the
-- smallest free number below that limit. The unique index on (concurrency_key,
-- concurrency_slot) of running jobs refuses a second claim of one slot (two workers
-- racing for a key's last one).
-- Of `queues` (NULL: any) and not of `skip_queues` (a `*` lane skips the capacity lanes').
-- A job that took the documented defaults (`policy_defaults`) is claimed as the worker's
-- own policy has it (the type's `queue` and `max_attempts` in `policy`): its queue
-- is the type's declared one for the lanes and pauses, and the claim stores both, so no
-- statement ever rewrites all such jobs at once (docs/architecture.md §5).
-- The plan must walk background_jobs_claim_rank_idx in its order and stop after `limit`
-- rows whatever the statistics say (the table may never have been analyzed). So `status` is
-- the only condition the planner can estimate; every other filter sits in a scalar
-- sub-select it can neither push into another index nor estimate as selective. With a
-- selective-looking filter (or a join on type) it walks the type index instead and sorts
-- every pending job of the type. The lease is read from `policy` for the same reason.
WITH clock AS (
    -- The one instant the whole claim counts tokens at (the walk, the batch, the spend):
    -- read row by row, a walk past a long backlog outlasted a token's refill, found the
    -- stepped-over key's bucket refilled part way and filled its batch with that key
    -- again, never reaching the keys behind it. Volatile, so computed once.
    SELECT clock_timestamp() AS t
), locked AS (
    SELECT j.id, j.type, j.concurrency_key, j.priority, j.available_at
    FROM background_jobs j
    WHERE j.status = 'pending'
      AND (SELECT j.type = ANY(%(types)s::text[])
                  AND j.available_at <= now()
                  -- A job past its deadline is never started (the expiry duty ends it):
                  -- NULL for a job without one, which answers at the first test.
                  AND (j.expires_at IS NULL OR j.expires_at > now())
                  AND (%(queues)s::text[] IS NULL OR q.queue = ANY(%(queues)s::text[]))
                  AND (%(skip_queues)s::text[] IS NULL
                       OR q.queue <> ALL(%(skip_queues)s::text[]))
                  AND NOT EXISTS (SELECT 1 FROM queue_controls qc
                                  WHERE qc.queue = q.queue AND qc.paused)
                  AND (j.concurrency_key IS NULL OR (
                        SELECT count(*) FROM background_jobs r
                        WHERE r.concurrency_key = j.concurrency_key AND r.status = 'running')
                      < (%(policy)s::jsonb -> j.type ->> 'limit')::int)
                  -- Limited work only (the lane's plain claim takes the rest), and only
                  -- while its buckets hold a token and its caps have room.
                  AND ((j.type = ANY(%(rate_types)s::text[]) OR j.type = ANY(%(cap_types)s::text[])
                         OR q.queue = ANY(%(rate_queues)s::text[])
                         OR q.queue = ANY(%(cap_queues)s::text[]))
                        AND NOT EXISTS (
                            SELECT 1 FROM unnest(%(rate_types)s::text[], %(type_rates)s::float8[],
                                                 %(type_bursts)s::float8[],
                                                 %(type_key_paths)s::text[])
                                          AS x(type, rate, burst, path)
                            WHERE x.type = j.type
                              AND jobwarden_window_tokens(jobwarden_rate_bucket(j.type, x.path, j.payload),
                                                   x.rate, x.burst, (SELECT t FROM clock)) < 1)
                        AND NOT EXISTS (
                            SELECT 1 FROM unnest(%(rate_queues)s::text[], %(queue_rates)s::float8[],
                                                 %(queue_bursts)s::float8[])
                                          AS x(queue, rate, burst)
                            WHERE x.queue = q.queue
                              AND jobwarden_window_tokens('queue:' || q.queue, x.rate, x.burst,
                                                   (SELECT t FROM clock)) < 1)
                        AND NOT EXISTS (
                            SELECT 1 FROM unnest(%(cap_types)s::text[], %(type_caps)s::int[])
                                          AS x(type, cap)
                            WHERE x.type = j.type
                              AND (SELECT count(*) FROM background_jobs r
                                   WHERE r.status = 'running' AND r.type = j.type) >= x.cap)
                        AND NOT EXISTS (
                            SELECT 1 FROM unnest(%(cap_queues)s::text[], %(queue_caps)s::int[])
                                          AS x(queue, cap)
                            WHERE x.queue = q.queue
                              AND (SELECT count(*) FROM background_jobs r
                                   WHERE r.status = 'running' AND r.queue = q.queue) >= x.cap))
           -- The queue the job is in for this claim: a defaulted one is the type's.
           FROM (SELECT CASE WHEN 'queue' = ANY(j.policy_defaults)
                             THEN %(policy)s::jsonb -> j.type ->> 'queue'
                             ELSE j.queue END AS queue) AS q)
      -- Computed once, before the walk: when every bucket a limited job could draw from
      -- is empty (keyless types', queues'; no caps, no keys), no job can be taken and the
      -- walk is skipped rather than stepping over the whole backlog job by job. A window's
      -- bucket is empty for most of each window while work waits.
      AND (SELECT %(cap_types)s::text[] IS NOT NULL OR %(cap_queues)s::text[] IS NOT NULL
                  OR EXISTS (
                      SELECT 1 FROM unnest(%(rate_types)s::text[], %(type_rates)s::float8[],
                                           %(type_bursts)s::float8[],
                                           %(type_key_paths)s::text[])
                                    AS x(type, rate, burst, path)
                      WHERE x.path IS NOT NULL
                         OR jobwarden_window_tokens('type:' || x.type, x.rate, x.burst,
                                                    (SELECT t FROM clock)) >= 1)
                  OR EXISTS (
                      SELECT 1 FROM unnest(%(rate_queues)s::text[], %(queue_rates)s::float8[],
                                           %(queue_bursts)s::float8[]) AS x(queue, rate, burst)
                      WHERE jobwarden_window_tokens('queue:' || x.queue, x.rate, x.burst,
                                                    (SELECT t FROM clock)) >= 1))
    -- Priorities age: the rank is available_at moved 10 seconds earlier per priority
    -- level, so a waiting job overtakes higher priorities that became available more
    -- than 10 s per level after it. It never changes while the job waits: an index key.
    ORDER BY jobwarden_claim_rank(j.available_at, j.priority), j.id
    -- A limit the planner cannot read. Planned with its value (the first calls, before
    -- the server settles on a generic plan, and every call through a pooler that
    -- prepares nothing) it would compare 200 rows with its guess of the pending ones
    -- (one row in 200 without statistics) and, finding them alike, read and sort
    -- every pending job: 60-85 ms a claim on a 50,000-job backlog instead of 4-5.
    LIMIT (SELECT %(limit)s::int)
    FOR UPDATE OF j SKIP LOCKED
), tagged AS (
    -- A limited claim's jobs with the buckets they draw from and the caps they count in,
    -- numbered within each in claim order.
    SELECT l.id, l.type, l.concurrency_key, l.priority, l.available_at,
           tb.bucket AS type_bucket, tb.rate AS type_rate, tb.burst AS type_burst,
           'queue:' || b.eff_queue AS queue_bucket, qr.rate AS queue_rate,
           qr.burst AS queue_burst, tc.cap AS type_cap, qc.cap AS queue_cap, b.eff_queue,
           row_number() OVER (PARTITION BY tb.bucket ORDER BY l.rank, l.id) AS nth_tb,
           row_number() OVER (PARTITION BY b.eff_queue ORDER BY l.rank, l.id) AS nth_q,
           row_number() OVER (PARTITION BY l.type ORDER BY l.rank, l.id) AS nth_t
    FROM (SELECT l.*, jobwarden_claim_rank(l.available_at, l.priority) AS rank
          FROM locked l) AS l
    JOIN LATERAL (
        SELECT j.payload, CASE WHEN 'queue' = ANY(j.policy_defaults)
                               THEN %(policy)s::jsonb -> j.type ->> 'queue'
                               ELSE j.queue END AS eff_queue
        FROM background_jobs j WHERE j.id = l.id) AS b ON true
    LEFT JOIN LATERAL (
        SELECT jobwarden_rate_bucket(l.type, x.path, b.payload) AS bucket, x.rate, x.burst
        FROM unnest(%(rate_types)s::text[], %(type_rates)s::float8[], %(type_bursts)s::float8[],
                    %(type_key_paths)s::text[]) AS x(type, rate, burst, path)
        WHERE x.type = l.type LIMIT 1) AS tb ON true
    LEFT JOIN LATERAL (
        SELECT x.rate, x.burst
        FROM unnest(%(rate_queues)s::text[], %(queue_rates)s::float8[],
                    %(queue_bursts)s::float8[]) AS x(queue, rate, burst)
        WHERE x.queue = b.eff_queue LIMIT 1) AS qr ON true
    LEFT JOIN LATERAL (
        SELECT x.cap FROM unnest(%(cap_types)s::text[], %(type_caps)s::int[]) AS x(type, cap)
        WHERE x.type = l.type LIMIT 1) AS tc ON true
    LEFT JOIN LATERAL (
        SELECT x.cap FROM unnest(%(cap_queues)s::text[], %(queue_caps)s::int[]) AS x(queue, cap)
        WHERE x.queue = b.eff_queue LIMIT 1) AS qc ON true
), admitted AS (
    -- A job only within every bucket's tokens and every cap's room (each counted on its
    -- own, so never above any).
    SELECT g.id, g.type, g.concurrency_key, g.priority, g.available_at
    FROM tagged g CROSS JOIN clock c
    WHERE (g.type_rate IS NULL
           OR g.nth_tb <= floor(jobwarden_window_tokens(g.type_bucket, g.type_rate, g.type_burst, c.t)))
      AND (g.queue_rate IS NULL
           OR g.nth_q <= floor(jobwarden_window_tokens(g.queue_bucket, g.queue_rate, g.queue_burst,
                                                c.t)))
      AND (g.type_cap IS NULL
           OR g.nth_t <= g.type_cap - (SELECT count(*) FROM background_jobs r
                                       WHERE r.status = 'running' AND r.type = g.type))
      AND (g.queue_cap IS NULL
           OR g.nth_q <= g.queue_cap - (SELECT count(*) FROM background_jobs r
                                        WHERE r.status = 'running' AND r.queue = g.eff_queue))
), keyed AS (
    -- The batch's jobs that have a key, numbered within their key in claim order, with
    -- their type's limit.
    SELECT l.id, l.type, l.concurrency_key,
           (%(policy)s::jsonb -> l.type ->> 'limit')::int AS lim, row_number() OVER (
               PARTITION BY l.concurrency_key
               ORDER BY jobwarden_claim_rank(l.available_at, l.priority), l.id) AS nth
    FROM admitted l
    WHERE l.concurrency_key IS NOT NULL
), free_slots AS (
    -- Each key's free slots, numbered smallest first: its nth job takes the nth. Only
    -- the first (running + jobs in the batch) numbers can be among them.
    SELECT k.concurrency_key, s.slot,
           row_number() OVER (PARTITION BY k.concurrency_key ORDER BY s.slot) AS nth
    FROM (SELECT q.concurrency_key, max(q.lim) AS lim, count(*) AS jobs,
                 ARRAY(SELECT r.concurrency_slot FROM background_jobs r
                       WHERE r.concurrency_key = q.concurrency_key
                         AND r.status = 'running') AS taken
          FROM keyed q GROUP BY q.concurrency_key) AS k
    CROSS JOIN LATERAL generate_series(
        0, least(k.lim, cardinality(k.taken) + k.jobs) - 1) AS s(slot)
    WHERE s.slot <> ALL (k.taken)
), selected AS (
    -- Keyless jobs all; a keyed one only if its slot is below its type's limit (the
    -- others stay pending: their key has no room left).
    SELECT id, type, NULL::smallint AS slot FROM admitted WHERE concurrency_key IS NULL
    UNION ALL
    SELECT q.id, q.type, f.slot::smallint
    FROM keyed q JOIN free_slots f USING (concurrency_key, nth)
    WHERE f.slot < q.lim
), claimed AS (
    UPDATE background_jobs j
    SET status = 'running',
        execution_id = gen_random_uuid(),
        attempts = j.attempts + 1,
        worker_id = %(worker_id)s,
        -- The instant the tokens were counted at (not the transaction's start, which
        -- may precede a wait for the scopes' locks): the started_at of claims of a scope
        -- then follow the buckets' own clock, and any T seconds of them hold at most
        -- burst + rate × T jobs.
        started_at = (SELECT t FROM clock),
        heartbeat_at = now(),
        lease_seconds = p.lease,
        lease_expires_at = now() + make_interval(secs => p.lease),
        cancel_requested_at = NULL,
        concurrency_slot = coalesce(s.slot, 0),
        -- The fields that took defaults take the policy in the write the claim does
        -- anyway (a retry or a hand-back keeps them: the job is no longer defaulted).
        queue = CASE WHEN 'queue' = ANY(j.policy_defaults) THEN p.queue ELSE j.queue END,
        max_attempts = CASE WHEN 'max_attempts' = ANY(j.policy_defaults)
                            THEN p.max_attempts ELSE j.max_attempts END,
        policy_defaults = NULL
    -- A LIMIT that never cuts, as in claim_jobs (which says why).
    FROM (SELECT * FROM selected LIMIT (SELECT %(limit)s::int)) AS s
    CROSS JOIN LATERAL (
        SELECT (t.policy ->> 'lease')::float8 AS lease, t.policy ->> 'queue' AS queue,
               (t.policy ->> 'max_attempts')::int AS max_attempts
        FROM (SELECT %(policy)s::jsonb -> s.type AS policy) AS t) AS p
    WHERE j.id = s.id
    RETURNING j.id, j.queue, j.type, j.version, j.payload, j.priority, j.attempts,
              j.max_attempts, j.execution_id, j.checkpoint, j.idempotency_key, j.snoozes,
              j.concurrency_key, j.available_at, j.batch_id, j.trace_context
), spent AS (
    -- One token per claimed job from each bucket it drew from, in bucket order (two
    -- claims of different scopes that share a bucket never wait on each other in a cycle):
    -- its jobs join the bucket's window (jobwarden_window_add, migration 0072).
    INSERT INTO job_rate_buckets AS k (bucket, tokens, rate, burst, updated_at,
                                       window_starts, window_counts)
    SELECT s.bucket, jobwarden_window_tokens(s.bucket, s.rate, s.burst, c.t) - s.n, s.rate,
           s.burst, c.t, w.window_starts, w.window_counts
    FROM (SELECT g.type_bucket AS bucket, max(g.type_rate) AS rate,
                 max(g.type_burst) AS burst, count(*) AS n
          FROM tagged g JOIN claimed d ON d.id = g.id
          WHERE g.type_rate IS NOT NULL GROUP BY g.type_bucket
          UNION ALL
          SELECT g.queue_bucket, max(g.queue_rate), max(g.queue_burst), count(*)
          FROM tagged g JOIN claimed d ON d.id = g.id
          WHERE g.queue_rate IS NOT NULL GROUP BY g.queue_bucket) AS s
    CROSS JOIN clock c
    CROSS JOIN LATERAL jobwarden_window_add('{}', '{}', c.t, s.n::int,
                                            s.burst / s.rate) AS w
    ORDER BY s.bucket
    ON CONFLICT (bucket) DO UPDATE
    SET tokens = EXCLUDED.tokens, rate = EXCLUDED.rate, burst = EXCLUDED.burst,
        updated_at = EXCLUDED.updated_at,
        (window_starts, window_counts) = (
            SELECT a.window_starts, a.window_counts
            FROM jobwarden_window_add(k.window_starts, k.window_counts, EXCLUDED.updated_at,
                                      EXCLUDED.window_counts[1],
                                      EXCLUDED.burst / EXCLUDED.rate) AS a)
)
SELECT id, queue, type, version, payload, priority, attempts, max_attempts,
       execution_id, checkpoint, idempotency_key, snoozes, concurrency_key,
       batch_id, trace_context
FROM claimed ORDER BY jobwarden_claim_rank(available_at, priority), id

-- name: claim_fair_jobs
-- claim_jobs for a lane's types with a fair key (docs/guide/fair-share.md): each key of
-- those types takes its turn, so one key's backlog never holds another key's first job
-- behind it. Jobs without a fair key never take this path (the plain claim leaves out
-- only the fair types). `walk`: the distinct keys with pending jobs, one probe of
-- background_jobs_fair_idx each (a loose index scan: a key's 100,000 jobs cost one
-- descent, not 100,000 rows), starting after `after` (the last key the lane's previous
-- fair claim reached) and wrapping round, at most `keys` of them: over many claims every
-- key is reached in turn. `picked`: each walked key's oldest runnable jobs of the handled
-- types, at most its share of the batch (`limit` split by weight: `weight_keys` and
-- `weights`, parallel; a key not named weighs 1), locked as claim_jobs locks. When they
-- are more than the batch, it takes them turn by turn (a key's first `weight` jobs in
-- turn 1, ...), in walk order within a turn; else all of them, unsorted. The rest is claim_jobs' (row filters, slots, the claim's write);
-- the result adds each job's fair key and its key's place in the walk (the key of the
-- highest is the next `after`).
-- The plan without statistics: each probe and each key's pick is an ORDER BY ... LIMIT on
-- the partial index whose predicate the statement repeats, so the planner walks it.
WITH RECURSIVE walk(key, wrapped, n) AS (
    SELECT f.key, f.wrapped, 1
    FROM ((SELECT j.fair_key AS key, false AS wrapped FROM background_jobs j
           WHERE j.status = 'pending' AND j.fair_key IS NOT NULL
             AND j.fair_key > %(after)s::text
           ORDER BY j.fair_key LIMIT 1)
          UNION ALL
          (SELECT j.fair_key, true FROM background_jobs j
           WHERE j.status = 'pending' AND j.fair_key IS NOT NULL
           ORDER BY j.fair_key LIMIT 1)
          LIMIT 1) AS f
    UNION ALL
    SELECT f.key, f.wrapped, w.n + 1
    FROM walk w
    CROSS JOIN LATERAL (
        (SELECT j.fair_key AS key, w.wrapped AS wrapped FROM background_jobs j
         WHERE j.status = 'pending' AND j.fair_key IS NOT NULL AND j.fair_key > w.key
         ORDER BY j.fair_key LIMIT 1)
        UNION ALL
        -- Past the last key: once round to the first (NULL `after`: started there).
        (SELECT j.fair_key, true FROM background_jobs j
         WHERE NOT w.wrapped AND j.status = 'pending' AND j.fair_key IS NOT NULL
         ORDER BY j.fair_key LIMIT 1)
        LIMIT 1) AS f
    WHERE w.n < %(keys)s::int
      -- Round once: after wrapping, up to `after` itself.
      AND NOT (f.wrapped AND %(after)s::text IS NOT NULL AND f.key > %(after)s::text)
), weighed AS (
    SELECT w.key, w.n, coalesce((
               SELECT x.weight FROM unnest(%(weight_keys)s::text[], %(weights)s::int[])
                                    AS x(key, weight)
               WHERE x.key = w.key LIMIT 1), 1) AS weight
    FROM walk w
), shared AS (
    -- Each key's share of the batch by weight, at least one job.
    SELECT k.key, k.n, k.weight,
           ceil(%(limit)s::int * k.weight::float8 / sum(k.weight) OVER ())::int AS share
    FROM weighed k
), picked AS (
    SELECT k.key, k.n, k.weight, c.id, c.type, c.concurrency_key, c.priority, c.available_at
    FROM shared k
    CROSS JOIN LATERAL (
        SELECT j.id, j.type, j.concurrency_key, j.priority, j.available_at
        FROM background_jobs j
        -- The key as a range of one value, and the order led by it: only the fair index
        -- gives that order. Written `fair_key = k.key`, the key is a constant to the
        -- order, which the claim index then gives as well, as cheaply on a table of a
        -- few pages: the generic plan an idle worker's first claim makes picked each
        -- key's jobs from it, reading every pending job ranked before the key's first,
        -- key by key, until its plans were made again (a claim of 200 from 21 keys
        -- behind one key's 30,000 jobs: 31,000 buffers, now 900).
        WHERE j.status = 'pending' AND j.fair_key IS NOT NULL
          AND j.fair_key >= k.key AND j.fair_key <= k.key
          AND (SELECT j.type = ANY(%(types)s::text[])
                      AND j.available_at <= now()
                      AND (j.expires_at IS NULL OR j.expires_at > now())
                      AND (%(queues)s::text[] IS NULL OR q.queue = ANY(%(queues)s::text[]))
                      AND (%(skip_queues)s::text[] IS NULL
                           OR q.queue <> ALL(%(skip_queues)s::text[]))
                      AND NOT EXISTS (SELECT 1 FROM queue_controls qc
                                      WHERE qc.queue = q.queue AND qc.paused)
                      AND (j.concurrency_key IS NULL OR (
                            SELECT count(*) FROM background_jobs r
                            WHERE r.concurrency_key = j.concurrency_key
                              AND r.status = 'running')
                          < (%(policy)s::jsonb -> j.type ->> 'limit')::int)
               FROM (SELECT CASE WHEN 'queue' = ANY(j.policy_defaults)
                                 THEN %(policy)s::jsonb -> j.type ->> 'queue'
                                 ELSE j.queue END AS queue) AS q)
        ORDER BY j.fair_key, jobwarden_claim_rank(j.available_at, j.priority), j.id
        LIMIT (SELECT k.share)
        FOR UPDATE OF j SKIP LOCKED) AS c
), fits AS (
    -- Whether every picked job fits in the batch: one key with work (a single key's
    -- share is the batch), or shares that add up to it, or keys with fewer jobs left.
    SELECT count(*) <= %(limit)s::int AS yes FROM picked
), locked AS (
    -- Then the batch is all of them, in no order (claimed takes them as a set): no turn
    -- is cut, so none is sorted. The test is one value, known before either branch
    -- runs, and the other branch is never run.
    SELECT p.id, p.type, p.concurrency_key, p.priority, p.available_at, p.n
    FROM picked p
    WHERE (SELECT f.yes FROM fits f)
    UNION ALL
    -- Else turn by turn: a key's nth job is in turn ceil(n / weight).
    (SELECT p.id, p.type, p.concurrency_key, p.priority, p.available_at, p.n
     FROM (SELECT p.*, row_number() OVER (
                      PARTITION BY p.key
                      ORDER BY jobwarden_claim_rank(p.available_at, p.priority), p.id) AS nth
           FROM picked p) AS p
     WHERE NOT (SELECT f.yes FROM fits f)
     ORDER BY ceil(p.nth::float8 / p.weight), p.n, p.nth
     LIMIT %(limit)s::int)
), keyed AS (
    -- The batch's jobs that have a key, numbered within their key in claim order, with
    -- their type's limit.
    SELECT l.id, l.type, l.concurrency_key, l.n,
           (%(policy)s::jsonb -> l.type ->> 'limit')::int AS lim, row_number() OVER (
               PARTITION BY l.concurrency_key
               ORDER BY jobwarden_claim_rank(l.available_at, l.priority), l.id) AS nth
    FROM locked l
    WHERE l.concurrency_key IS NOT NULL
), free_slots AS (
    -- Each key's free slots, numbered smallest first: its nth job takes the nth. Only
    -- the first (running + jobs in the batch) numbers can be among them.
    SELECT k.concurrency_key, s.slot,
           row_number() OVER (PARTITION BY k.concurrency_key ORDER BY s.slot) AS nth
    FROM (SELECT q.concurrency_key, max(q.lim) AS lim, count(*) AS jobs,
                 ARRAY(SELECT r.concurrency_slot FROM background_jobs r
                       WHERE r.concurrency_key = q.concurrency_key
                         AND r.status = 'running') AS taken
          FROM keyed q GROUP BY q.concurrency_key) AS k
    CROSS JOIN LATERAL generate_series(
        0, least(k.lim, cardinality(k.taken) + k.jobs) - 1) AS s(slot)
    WHERE s.slot <> ALL (k.taken)
), selected AS MATERIALIZED (
    -- Keyless jobs all; a keyed one only if its slot is below its type's limit (the
    -- others stay pending: their key has no room left).
    -- Materialized: the UPDATE's join then weighs a scan of its rows, not the cost of
    -- making them (the walk's and slots' estimates, hundreds of times the join's own).
    -- Inlined, that cost hid the probe's saving in the planner's 1% margin, and the
    -- young plan read the whole table for each row claimed (a claim of 200 jobs of a
    -- 30,000-job table: 260,000 buffers).
    SELECT id, type, n, NULL::smallint AS slot FROM locked WHERE concurrency_key IS NULL
    UNION ALL
    SELECT q.id, q.type, q.n, f.slot::smallint
    FROM keyed q JOIN free_slots f USING (concurrency_key, nth)
    WHERE f.slot < q.lim
), claimed AS (
    UPDATE background_jobs j
    SET status = 'running',
        execution_id = gen_random_uuid(),
        attempts = j.attempts + 1,
        worker_id = %(worker_id)s,
        started_at = now(),
        heartbeat_at = now(),
        lease_seconds = p.lease,
        lease_expires_at = now() + make_interval(secs => p.lease),
        cancel_requested_at = NULL,
        concurrency_slot = coalesce(s.slot, 0),
        -- The fields that took defaults take the policy in the write the claim does
        -- anyway (a retry or a hand-back keeps them: the job is no longer defaulted).
        queue = CASE WHEN 'queue' = ANY(j.policy_defaults) THEN p.queue ELSE j.queue END,
        max_attempts = CASE WHEN 'max_attempts' = ANY(j.policy_defaults)
                            THEN p.max_attempts ELSE j.max_attempts END,
        policy_defaults = NULL
    -- A LIMIT that never cuts, as in claim_jobs (which says why), over the materialized
    -- batch (`selected` says why).
    FROM (SELECT * FROM selected LIMIT (SELECT %(limit)s::int)) AS s
    CROSS JOIN LATERAL (
        SELECT (t.policy ->> 'lease')::float8 AS lease, t.policy ->> 'queue' AS queue,
               (t.policy ->> 'max_attempts')::int AS max_attempts
        FROM (SELECT %(policy)s::jsonb -> s.type AS policy) AS t) AS p
    WHERE j.id = s.id
    RETURNING j.id, j.queue, j.type, j.version, j.payload, j.priority, j.attempts,
              j.max_attempts, j.execution_id, j.checkpoint, j.idempotency_key, j.snoozes,
              j.concurrency_key, j.available_at, j.batch_id, j.trace_context, j.fair_key,
              s.n
)
-- No job_executions row yet: a running execution lives on its job row (execution_id,
-- worker_id, started_at, heartbeat_at, the lease), and finish_executions writes its
-- history row once, when it ends (migration 0061; job_executions_all shows both).
SELECT id, queue, type, version, payload, priority, attempts, max_attempts,
       execution_id, checkpoint, idempotency_key, snoozes, concurrency_key,
       batch_id, trace_context, fair_key,
       -- Its key's place in the walk: the key of the claim's highest is its last in the
       -- walk's order (the server's collation), the next claim's `after` (fair_cursor).
       n
FROM claimed ORDER BY jobwarden_claim_rank(available_at, priority), id

-- name: finish_executions
-- Every way out of `running` (worker/core/transitions.py): a handler's outcome from the
-- completer or from its own business transaction, a graceful hand-back, a lost worker's
-- recovery. Each row is written only if its execution still owns the job (status
-- 'running' and its execution_id) and, for recovery (`lapsed_only`), only while the
-- lease is still ended; returns the jobs moved and the status each took (absent rows
-- were refused). The caller gives each row what the transitions table says: the next
-- status, the recorded outcome, whether the attempt stays spent, the code.
-- A move back to pending of a job whose cancellation was requested meanwhile ends it
-- cancelled instead, with the code CANCELLED; its execution is recorded as cancelled,
-- except a lost worker's, which stays what it was (it never saw the request).
-- The rows come as parallel arrays, sorted by job id; they drive the join, a primary-key
-- lookup per row, so rows are locked in job-id order like the heartbeat's, whatever the
-- table's statistics (none, fresh, or stale: TRUNCATE keeps them;
-- tests/integration/test_lock_order.py). So the planner sees one condition on the job,
-- its id, and as `= ANY(ARRAY[..])`: a primary-key lookup, but a join it can neither
-- hash nor merge (a hash join walks the jobs in heap order). The guards sit in a scalar
-- sub-select it cannot estimate (as in claim_jobs): statistics that say few jobs run
-- would have it walk every running job by the lease index, in that index's order, for
-- each batch. The heartbeat's explicit lock step would cost this statement, the hot
-- path, about a tenth of the drain rate. (Arrays cost about a third less database time
-- per row than the same rows as JSON.)
-- A completed job stores what its handler returned (`results`, JSON; NULL: nothing).
-- A job with dependents (`dependents` > 0: none in a batch of ordinary jobs, so the
-- release below reads nothing for them) releases them in this statement: its edges
-- that its new status satisfies (completed; any final state for a `run_anyway` edge)
-- are marked, and each dependent's count of edges left is decremented under its row
-- lock, so two parents finishing at once in two transactions cannot both leave it
-- waiting (docs/guide/flows.md). An enqueue that held the job's row lock may have
-- committed edges while this statement waited for it: they are not in its snapshot,
-- and the last column says so; the caller then runs release_dependents, in a snapshot
-- of its own (the same transaction unless the connection commits each statement).
-- The last column says the job's batch (NULL for all but a batch's members): the
-- caller then counts it there (batch_count).
WITH job AS (
    UPDATE background_jobs j
    SET status = CASE WHEN x.status = 'pending' AND j.cancel_requested_at IS NOT NULL
                      THEN 'cancelled' ELSE x.status END,
        available_at = CASE WHEN x.status = 'pending' AND j.cancel_requested_at IS NULL
                            THEN now() + make_interval(secs => x.delay)
                            ELSE j.available_at END,
        completed_at = CASE WHEN x.status = 'completed' THEN now() END,
        failed_at = CASE WHEN x.status = 'failed' THEN now() END,
        cancelled_at = CASE WHEN x.status = 'cancelled'
                                 OR (x.status = 'pending' AND j.cancel_requested_at IS NOT NULL)
                            THEN now() END,
        skipped_at = CASE WHEN x.status = 'skipped' THEN now() END,
        -- A snooze and a hand-back give their attempt back; a snooze is counted.
        attempts = greatest(j.attempts - 1 + x.attempt_spent::int, 0),
        snoozes = j.snoozes + CASE WHEN x.outcome = 'snoozed' THEN 1 ELSE 0 END,
        last_error_code = CASE WHEN x.status = 'pending' AND j.cancel_requested_at IS NOT NULL
                               THEN 'CANCELLED'
                               ELSE COALESCE(x.error_code, j.last_error_code) END,
        last_error = COALESCE(x.error, j.last_error),
        checkpoint = COALESCE(x.checkpoint, j.checkpoint),
        progress = COALESCE(x.progress, j.progress),
        result = COALESCE(x.result, j.result),
        lease_expires_at = NULL
    FROM unnest(%(job_ids)s::bigint[], %(execution_ids)s::uuid[], %(statuses)s::text[],
                %(outcomes)s::text[], %(error_codes)s::text[], %(errors)s::text[],
                %(delays)s::float8[], %(progress)s::jsonb[], %(checkpoints)s::jsonb[],
                %(tracebacks)s::text[], %(attempts_spent)s::bool[], %(lapsed_only)s::bool[],
                %(results)s::jsonb[])
         AS x(job_id, execution_id, status, outcome, error_code, error, delay, progress,
              checkpoint, traceback, attempt_spent, lapsed_only, result)
    WHERE j.id = ANY(ARRAY[x.job_id])
      AND (SELECT j.status = 'running' AND j.execution_id = x.execution_id
                  AND (NOT x.lapsed_only OR j.lease_expires_at < now()))
    RETURNING j.id, j.execution_id, j.status, x.outcome, x.error_code, x.error, x.traceback,
              j.queue, j.type, j.worker_id, j.started_at, j.heartbeat_at,
              -- The attempt's number: what the claim left, less what was given back.
              j.attempts + 1 - x.attempt_spent::int AS attempt,
              j.available_at, j.dependents, j.batch_id
), released AS (
    -- (job_dependencies unaliased: this text must fit psycopg's parse cache)
    UPDATE job_dependencies SET released_at = now()
    FROM job p
    WHERE p.dependents > 0 AND parent_id = p.id AND released_at IS NULL
      -- (a finish leaves no job running or waiting: not pending or unknown is final)
      AND (p.status = 'completed' OR run_anyway AND p.status NOT IN ('pending', 'unknown'))
    RETURNING job_id
), freed AS (
    -- Every dependent, whatever its status: its count stays its edges not released, and
    -- one an operator's retry holds (cancelled in this snapshot) is waited for and read
    -- as the retry left it, back in waiting (operator_jobs_lock_for_retry).
    UPDATE background_jobs d
    SET waiting_on = d.waiting_on - r.n,
        status = CASE WHEN d.status = 'waiting' AND d.waiting_on <= r.n THEN 'pending'
                      ELSE d.status END,
        available_at = greatest(d.available_at, now())
    FROM (SELECT job_id, count(*) AS n FROM released GROUP BY job_id) r
    WHERE d.id = r.job_id
    -- Wake the workers of the queue (a transaction sends one notification per queue).
    RETURNING pg_notify('jobwarden_jobs', d.queue)
), prior AS MATERIALIZED (
    -- When the job had become available, for the rows the UPDATE above may move back to
    -- pending (`pending_ids`): it rewrites their available_at, so it is read here, in
    -- this statement's snapshot from before it. Every other row keeps its own, which
    -- RETURNING gives. Materialized: one index scan of those ids (none in a batch of
    -- completions), not a lookup per row of the batch.
    SELECT o.id, o.available_at FROM background_jobs o
    WHERE o.id = ANY(%(pending_ids)s::bigint[])
), ended AS (
    SELECT job.*, coalesce(prior.available_at, job.available_at) AS scheduled_at,
           CASE WHEN job.status = 'cancelled' AND job.outcome <> 'worker_lost'
                THEN 'cancelled' ELSE job.outcome END AS recorded,
           -- A lost worker ran until its last heartbeat, as far as anyone knows.
           extract(epoch FROM CASE WHEN job.outcome = 'worker_lost'
                                   THEN coalesce(job.heartbeat_at, job.started_at)
                                   ELSE now() END - job.started_at) * 1000 AS duration_ms
    FROM job LEFT JOIN prior USING (id)
), closed AS (
    -- An execution claimed by a worker of a version before migration 0061 has a row
    -- opened at its claim: it is closed, as before.
    UPDATE job_executions e
    SET finished_at = now(), outcome = x.recorded, error_code = x.error_code,
        error = x.error, traceback = x.traceback, duration_ms = x.duration_ms
    FROM ended x
    -- Open rows have no finished_at: they live in the default partition alone (migration
    -- 0066), so this reads one partition, not every week's.
    WHERE e.execution_id = x.execution_id AND e.finished_at IS NULL
), recorded AS (
    -- Every other execution's history is written here, once: its only write to
    -- job_executions (the rollup triggers read the outcome from it, as before).
    INSERT INTO job_executions
        (job_id, execution_id, attempt, queue, type, worker_id, scheduled_at, started_at,
         heartbeat_at, finished_at, outcome, error_code, error, traceback, duration_ms)
    SELECT x.id, x.execution_id, x.attempt, x.queue, x.type, x.worker_id, x.scheduled_at,
           x.started_at, x.heartbeat_at, now(), x.recorded, x.error_code, x.error,
           x.traceback, x.duration_ms
    FROM ended x
    WHERE NOT EXISTS (SELECT 1 FROM job_executions e
                      WHERE e.execution_id = x.execution_id AND e.finished_at IS NULL)
    ORDER BY x.id
)
-- The jobs moved, whether or not an execution row was there to close. The fourth
-- column: the job has edges this snapshot cannot see (its `dependents`, read from the
-- row version this UPDATE waited for, counts them), so the caller runs
-- release_dependents. AND stops at a job without dependents: no lookup for an
-- ordinary job.
SELECT id, execution_id, status,
       dependents > 0 AND dependents > (SELECT count(*) FROM job_dependencies
                                        WHERE parent_id = job.id),
       batch_id
FROM job

-- name: heartbeat_executions
-- Renew the leases of this worker's running executions in one statement; returns the
-- ones it still owns and whether cancellation was requested for each.
WITH x AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb)
        AS x(id bigint, execution_id uuid, progress jsonb, checkpoint jsonb)
), locked AS MATERIALIZED (
    -- Lock the rows first, in job-id order, whatever plan the UPDATE below gets (a hash
    -- join walks them in heap order): this and a batch of outcomes (finish_executions,
    -- in id order too) then wait for each other instead of deadlocking (40P01).
    -- A primary-key lookup per row whatever the statistics, as in finish_executions:
    -- the planner sees only the id, as `= ANY(ARRAY[..])`, and the guards sit in a
    -- sub-select, else a rare-looking `running` walks every running job.
    SELECT j.id FROM background_jobs j JOIN x ON j.id = ANY(ARRAY[x.id])
    WHERE (SELECT j.status = 'running' AND j.execution_id = x.execution_id)
    ORDER BY j.id
    FOR UPDATE OF j
), beats AS (
    UPDATE background_jobs j
    SET heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => j.lease_seconds),
        progress = COALESCE(x.progress, j.progress),
        checkpoint = COALESCE(x.checkpoint, j.checkpoint)
    FROM x JOIN locked l ON l.id = x.id
    WHERE j.id = ANY(ARRAY[l.id])
      AND (SELECT j.execution_id = x.execution_id AND j.status = 'running')
    RETURNING j.id, j.execution_id, j.cancel_requested_at IS NOT NULL AS cancel_requested
)
-- The running execution's heartbeat is its job row's (job_executions_all shows it).
SELECT id, execution_id, cancel_requested FROM beats

-- name: count_events
-- Add one to an event's total per type listed (a type listed twice counts twice).
INSERT INTO job_event_totals AS t (event, type, total)
-- In type order, so two counts of one event lock their rows in one order.
SELECT %(event)s::text, type, count(*) FROM unnest(%(types)s::text[]) AS type GROUP BY type
ORDER BY type
ON CONFLICT (event, type) DO UPDATE SET total = t.total + excluded.total, updated_at = now()

-- name: execution_outcomes
-- How executions ended, as recorded (to explain why late writes were refused): found
-- by their jobs (job_executions_job_idx); the history has no index of finished
-- executions' ids (migration 0093).
SELECT execution_id, outcome FROM job_executions
WHERE job_id = ANY(%(job_ids)s::bigint[])
  AND execution_id = ANY(%(execution_ids)s::uuid[])

-- name: save_progress
-- Write one execution's progress and checkpoint now (guarded like a heartbeat). With both
-- NULL it only renews the lease: the executor's check before starting a claimed job its
-- own clock can no longer vouch for (worker/core/lease.py); no row back means the execution
-- was recovered or taken over while the process was frozen or cut off.
UPDATE background_jobs
SET progress = COALESCE(%(progress)s::jsonb, progress),
    checkpoint = COALESCE(%(checkpoint)s::jsonb, checkpoint),
    heartbeat_at = now(),
    lease_expires_at = now() + make_interval(secs => lease_seconds)
WHERE id = %(job_id)s AND status = 'running' AND execution_id = %(execution_id)s
RETURNING cancel_requested_at IS NOT NULL AS cancel_requested

-- name: lock_stale_running
-- Running jobs whose lease ran out, locked for recovery (others' recoveries skip them);
-- recovery then moves them with finish_executions (`lapsed_only`) in this transaction.
SELECT id, execution_id, type, attempts, max_attempts, worker_id, heartbeat_at
FROM background_jobs
WHERE status = 'running' AND lease_expires_at < now()
ORDER BY lease_expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: register_worker
-- Announce a worker process (or re-announce it after a reconnect).
INSERT INTO job_workers
    (worker_id, host, pid, queues, lanes, job_types, concurrency, version, state)
VALUES (%(worker_id)s, %(host)s, %(pid)s, %(queues)s, %(lanes)s, %(job_types)s,
        %(concurrency)s, %(version)s, 'running')
ON CONFLICT (worker_id) DO UPDATE
SET heartbeat_at = now(), state = EXCLUDED.state, stopped_at = NULL

-- name: worker_heartbeat
-- Renew a worker's own row and report its state (running / draining) and its event
-- loops' worst lag since the last beat (NULL: it has none).
UPDATE job_workers SET heartbeat_at = now(), state = %(state)s,
       loop_lag_ms = %(loop_lag_ms)s::float8
WHERE worker_id = %(worker_id)s
RETURNING worker_id

-- name: worker_stopped
-- A worker exits cleanly.
UPDATE job_workers SET state = 'stopped', stopped_at = now(), heartbeat_at = now()
WHERE worker_id = %(worker_id)s

-- name: mark_gone_workers
-- Workers whose heartbeat is older than `stale_after` seconds are gone.
UPDATE job_workers SET state = 'gone', stopped_at = coalesce(stopped_at, now())
WHERE state IN ('running', 'draining')
  AND heartbeat_at < now() - make_interval(secs => %(stale_after)s)
RETURNING worker_id

-- name: stats_by_status
-- Job counts by status, queue and type.
SELECT status, queue, type, count(*) AS n FROM background_jobs
GROUP BY status, queue, type ORDER BY status, queue, type

-- name: oldest_pending_age
-- Seconds since the oldest runnable pending job became available, per queue.
SELECT queue, extract(epoch FROM now() - min(available_at)) AS age_seconds, count(*) AS n
FROM background_jobs WHERE status = 'pending' AND available_at <= now()
GROUP BY queue ORDER BY queue

-- name: reserve_effect
-- Reserve a business-effect key while this execution owns its job; returns the key's row
-- as it now stands, or no row at all when the execution no longer owns the job. The job
-- row is locked FOR SHARE, so recovery cannot hand the job to another execution between
-- the ownership check and the insert (a stale reservation would send the owner to unknown).
WITH owner AS (
    SELECT id FROM background_jobs
    WHERE id = %(job_id)s AND status = 'running' AND execution_id = %(execution_id)s
    FOR SHARE
), ins AS (
    INSERT INTO processed_effects (key, job_id, execution_id, state)
    SELECT %(key)s, id, %(execution_id)s, 'reserved' FROM owner
    ON CONFLICT (key) DO NOTHING
    RETURNING key, job_id, execution_id, state, result, true AS fresh
), found AS (
    SELECT * FROM ins
    UNION ALL
    SELECT key, job_id, execution_id, state, result, false FROM processed_effects
    WHERE key = %(key)s AND NOT EXISTS (SELECT 1 FROM ins)
)
SELECT found.* FROM owner LEFT JOIN found ON true

-- name: take_over_effect
-- A retry takes over a reservation whose earlier execution is known not to have acted,
-- only while this execution owns its job (locked as in reserve_effect). No row: it does
-- not own the job; a row with a NULL key: the reservation was completed or released since.
WITH owner AS (
    SELECT id FROM background_jobs
    WHERE id = %(job_id)s AND status = 'running' AND execution_id = %(execution_id)s
    FOR SHARE
), moved AS (
    UPDATE processed_effects e SET execution_id = %(execution_id)s, job_id = owner.id
    FROM owner
    WHERE e.key = %(key)s AND e.state = 'reserved'
    RETURNING e.key
)
SELECT moved.key FROM owner LEFT JOIN moved ON true

-- name: complete_effect
-- Mark an effect done with its result (the ledger's proof it happened).
UPDATE processed_effects SET state = 'done', result = %(result)s::jsonb, done_at = now()
WHERE key = %(key)s AND state = 'reserved' AND execution_id = %(execution_id)s
RETURNING key

-- name: release_effect
-- Drop a reservation after the effect certainly did not happen (so a retry may try).
DELETE FROM processed_effects
WHERE key = %(key)s AND state = 'reserved' AND execution_id = %(execution_id)s

-- name: notify_queues
-- Wake the workers serving these queues (jobs just went back to pending there).
SELECT count(pg_notify('jobwarden_jobs', queue))
FROM (SELECT DISTINCT unnest(%(queues)s::text[]) AS queue) AS q

-- name: unknown_jobs
-- Jobs whose outcome is unknown and needs reconciliation, oldest first.
SELECT id, type, queue, attempts, last_error_code, last_error, worker_id, heartbeat_at
FROM background_jobs WHERE status = 'unknown' ORDER BY id LIMIT %(limit)s

-- name: db_now
-- The database's clock (the start of the transaction): schedules tick by it, not ours.
SELECT now()

-- name: discard_plans
-- Drop this session's cached plans, its prepared statements' and its triggers' alike: the
-- next run of each is planned again for the tables as they are now (worker/store/db.py,
-- DedicatedConnection.replan). A claim connection's session still plans generically
-- (claim_plans_generic): its next claim is planned once, for the tables as they are.
DISCARD PLANS

-- name: claim_plans_generic
-- A claim connection's session plans its prepared statements once, generically, from
-- their first run (worker/engine/producer.py, `prepare_claims`): planning claim_jobs
-- takes about 2 ms, which the server otherwise spends on each of its first five runs
-- (custom plans, before it settles on the generic one), and psycopg sent it unprepared,
-- planned every time, for five runs before that (the claims are prepared from their
-- first run now). Its plan does not depend on the values (see claim_jobs), nor does
-- that of any other statement this session runs.
SET plan_cache_mode = force_generic_plan

-- name: claim_commits_async
-- A claim connection's session commits without waiting for the WAL flush (prepare_claims):
-- a one-job claim took 0.74 ms with the wait and 0.56 ms without, most of an idle
-- worker's enqueue-to-start. A claim lost to a server crash before its flush (at most
-- three wal_writer_delay, or until any later synchronous commit, which flushes it too)
-- is a claim that never happened: the job is pending again with its attempt unspent,
-- and the worker that started it is fenced out like any execution that lost its job
-- (its heartbeat renews nothing, so it is told the lease is lost, and finish_executions
-- refuses its outcome: docs/faults.md, "Claims committed without waiting for the flush").
-- Every other write of the job's life (outcomes, the effects ledger, hand-backs) keeps
-- the server's synchronous_commit.
SET synchronous_commit = off

-- name: listen_for_jobs
-- Subscribe this session to the wake-ups of enqueues and retries (worker/engine/listener.py).
LISTEN jobwarden_jobs

-- name: insert_execution_logs
-- The log lines of executions whose outcomes this transaction just wrote (write_batch):
-- one row each, finished when their execution did (the same transaction's now()). An
-- execution has one outcome, so one row; DO NOTHING keeps a retried write harmless.
INSERT INTO job_execution_logs (execution_id, job_id, finished_at, lines, dropped)
SELECT x.execution_id, x.job_id, now(), x.lines, x.dropped
FROM unnest(%(execution_ids)s::uuid[], %(job_ids)s::bigint[], %(lines)s::jsonb[],
            %(dropped)s::int[]) AS x(execution_id, job_id, lines, dropped)
ON CONFLICT (execution_id) DO NOTHING

-- Select and act (console/views/bulk.py, console/data/bulk.py): a reviewed set of jobs of
-- any size, held by the server in pages of ids, acted on in chunks of one transaction each.
--
-- A selection's jobs are in `console_selection_jobs`, `page` ids per row in the order the
-- action takes them (newest first): the job at ordinal n is element n mod page + 1 of
-- page n / page; `statuses` holds each one's status when selected, in the same places
-- (migration 0071), for the action to act only on jobs still as the review showed them. The action's progress is `console_selections.next_ord`, moved on by each
-- chunk in the chunk's own transaction (docs/architecture.md §3, migration 0030).

-- name: console_selection_create
-- Hold a set of jobs for one bulk action by one operator: the given ids (ticked), or the
-- jobs of another selection (`within`: narrowing it), or every job matching the filters
-- (all of them also narrow the first two; `statuses`: only jobs in one of them, those
-- the action starts from when asked). No row is written when no job matches.
-- `breakdown`: the jobs by status, type and failure age as this statement read them (the
-- review shows it whatever the selection's size); the age buckets are half-open ranges of
-- failed_at ending at now(), the selection's created_at, so narrowing to a bucket's
-- bounds picks exactly its jobs.
WITH members AS (
    SELECT unnest(%(job_ids)s::bigint[]) AS id
    UNION ALL
    SELECT unnest(p.job_ids) FROM console_selection_jobs p
    WHERE p.selection_id = %(within)s::uuid
), picked AS (
    SELECT j.id, j.status, j.type,
           CASE WHEN j.failed_at IS NULL THEN 'never'
                WHEN j.failed_at >= now() - interval '1 hour' THEN 'hour'
                WHEN j.failed_at >= now() - interval '1 day' THEN 'day'
                WHEN j.failed_at >= now() - interval '7 days' THEN 'week'
                ELSE 'older' END AS age,
           row_number() OVER (ORDER BY j.id DESC) - 1 AS ord
    FROM background_jobs j
    WHERE (NOT %(given)s::boolean OR j.id IN (SELECT id FROM members))
      AND (%(status)s::text IS NULL OR j.status = %(status)s::text)
      AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
      AND (%(type)s::text IS NULL OR j.type = %(type)s::text)
      AND (%(error_code)s::text IS NULL OR j.last_error_code = %(error_code)s::text)
      AND (%(search_key)s::text IS NULL
           OR j.idempotency_key = %(search_key)s::text
           OR j.id = %(search_id)s::bigint)
      AND (%(flow_ids)s::bigint[] IS NULL OR j.id = ANY(%(flow_ids)s::bigint[]))
      AND (%(batch)s::bigint IS NULL OR j.batch_id = %(batch)s::bigint)
      AND (%(created_from)s::timestamptz IS NULL
           OR (j.id >= %(from_id)s::bigint AND j.created_at >= %(created_from)s::timestamptz))
      AND (%(created_to)s::timestamptz IS NULL
           OR (j.id < %(to_id)s::bigint AND j.created_at < %(created_to)s::timestamptz))
      AND (%(statuses)s::text[] IS NULL OR j.status = ANY(%(statuses)s::text[]))
      -- a group of Needs review: its code or none, its reconciler's verdict or none
      AND (NOT %(no_code)s::boolean OR j.last_error_code IS NULL)
      AND (%(verdict)s::text IS NULL OR j.reconcile_verdict = %(verdict)s::text)
      AND (NOT %(no_verdict)s::boolean OR j.reconcile_verdict IS NULL)
      AND (%(failed_from)s::timestamptz IS NULL OR j.failed_at >= %(failed_from)s::timestamptz)
      AND (%(failed_to)s::timestamptz IS NULL OR j.failed_at < %(failed_to)s::timestamptz)
), counts AS (
    SELECT status, type, age, count(*) AS jobs FROM picked GROUP BY status, type, age
), selection AS (
    INSERT INTO console_selections (id, actor, action, description, jobs, breakdown)
    SELECT %(id)s::uuid, %(actor)s::text, %(action)s::text, %(description)s::text,
           sum(c.jobs), jsonb_agg(to_jsonb(c) ORDER BY c.status, c.type, c.age)
    FROM counts c
    HAVING count(*) > 0
    RETURNING id, jobs
), pages AS (
    INSERT INTO console_selection_jobs (selection_id, page, job_ids, statuses)
    SELECT s.id, p.ord / %(page)s::int, array_agg(p.id ORDER BY p.ord),
           array_agg(p.status ORDER BY p.ord)
    FROM picked p CROSS JOIN selection s
    GROUP BY s.id, p.ord / %(page)s::int
    RETURNING page
)
SELECT coalesce((SELECT jobs FROM selection), 0) AS jobs, (SELECT count(*) FROM pages) AS pages;

-- name: console_selection_time_limit
-- How long the selecting statement of this transaction may run (milliseconds): a request
-- must answer before the web server gives up on it.
SELECT set_config('statement_timeout', %(ms)s::text, true) AS statement_timeout;

-- name: console_selection_get
-- One of this operator's selections and its action's progress; `usable`: not started and
-- made in the last hour (a review older than that is stale: select again).
SELECT id, action, description, created_at, used_at, jobs, breakdown, state, reason,
       request_id, canary, next_ord, changed, left_alone, finished_at,
       used_at IS NULL AND created_at > now() - interval '1 hour' AS usable,
       EXISTS (SELECT 1 FROM console_selection_jobs p WHERE p.selection_id = s.id) AS held
FROM console_selections s
WHERE id = %(id)s::uuid AND actor = %(actor)s::text;

-- name: console_selection_range
-- The selection's job ids at ordinals lo <= n < hi, in order, with the status each had
-- when selected (NULL for a selection stored before migration 0071).
SELECT coalesce(array_agg(u.id ORDER BY p.page, u.n), '{}') AS job_ids,
       coalesce(array_agg(p.statuses[u.n] ORDER BY p.page, u.n), '{}') AS statuses
FROM console_selection_jobs p
CROSS JOIN LATERAL unnest(p.job_ids) WITH ORDINALITY AS u (id, n)
WHERE p.selection_id = %(id)s::uuid
  AND p.page BETWEEN %(lo)s::int / %(page)s::int AND (%(hi)s::int - 1) / %(page)s::int
  AND p.page * %(page)s::int + u.n - 1 >= %(lo)s::int
  AND p.page * %(page)s::int + u.n - 1 < %(hi)s::int;

-- name: console_bulk_outcome
-- How the jobs this bulk action changed stand now, among its first `hi` ordinals (the
-- chunks done): per part (`canary`: an ordinal below the canary's size), status and, for
-- a job that ended failed or unknown, its error code. The jobs its chunks left alone
-- (console_bulk_steps.left_alone: no audit row of its id) are not its outcome; they are
-- listed apart. One probe of the primary key per job: 25,000 jobs cost ~0.2 s.
WITH held AS (
    SELECT u.id, p.page * %(page)s::int + u.n - 1 < %(canary)s::int AS canary
    FROM console_selection_jobs p
    CROSS JOIN LATERAL unnest(p.job_ids) WITH ORDINALITY AS u (id, n)
    WHERE p.selection_id = %(id)s::uuid
      AND p.page <= (%(hi)s::int - 1) / %(page)s::int
      AND p.page * %(page)s::int + u.n - 1 < %(hi)s::int
), left_alone AS (
    SELECT unnest(s.left_alone) AS id FROM console_bulk_steps s
    WHERE s.selection_id = %(id)s::uuid
)
SELECT h.canary, j.status,
       CASE WHEN j.status IN ('failed', 'unknown') THEN j.last_error_code END AS error_code,
       count(*) AS jobs
FROM held h
JOIN background_jobs j ON j.id = h.id
WHERE NOT EXISTS (SELECT 1 FROM left_alone l WHERE l.id = h.id)
GROUP BY 1, 2, 3
ORDER BY jobs DESC, 2, 3;

-- name: console_selection_start
-- Start the action once (compare-and-set on used_at): all of it, or a canary of the first
-- `canary` jobs. Only an unused selection of the last hour starts.
UPDATE console_selections
SET used_at = now(), reason = %(reason)s::text, request_id = %(request_id)s::text,
    canary = %(canary)s::int,
    state = CASE WHEN %(canary)s::int IS NULL THEN 'running' ELSE 'canary' END
WHERE id = %(id)s::uuid AND actor = %(actor)s::text AND used_at IS NULL
  AND created_at > now() - interval '1 hour'
RETURNING id, state;

-- name: console_bulk_dependents_record
-- A started cancel or skip's choice of what becomes of its jobs' dependents (the review
-- offered it: some waited), audited once for the bulk action as a row of no job, with its
-- reason and form; each chunk reads it back (console_bulk_step_claim).
INSERT INTO job_audit (bulk_id, actor, role, action, reason, request_id, details)
SELECT id, %(actor)s::text, %(role)s::text, 'start_bulk', reason, request_id,
       jsonb_build_object('bulk_action', action, 'dependents', %(dependents)s::text,
                          'jobs', jobs, 'canary', canary)
FROM console_selections
WHERE id = %(id)s::uuid AND actor = %(actor)s::text AND action IN ('cancel', 'skip');

-- name: console_bulk_step_claim
-- The next chunk of a started action, under the selection row's lock: ordinals next_ord
-- up to last_ord (at most `chunk` jobs, and never past the canary while it is one), and
-- the dependents choice recorded when it started ("hold" when none was offered). No
-- row: nothing left to do now, or another request is doing a chunk (SKIP LOCKED).
SELECT id, action, reason, request_id, state, jobs, canary, next_ord, created_at,
       least(next_ord + %(chunk)s::int,
             CASE WHEN state = 'canary' THEN canary ELSE jobs END) AS last_ord,
       coalesce((SELECT a.details->>'dependents' FROM job_audit a
                 WHERE a.bulk_id = s.id AND a.action = 'start_bulk'
                 ORDER BY a.id LIMIT 1), 'hold') AS dependents
FROM console_selections s
WHERE id = %(id)s::uuid AND actor = %(actor)s::text
  AND state IN ('canary', 'running')
  AND next_ord < CASE WHEN state = 'canary' THEN canary ELSE jobs END
FOR UPDATE SKIP LOCKED;

-- name: console_bulk_left_alone
-- Which of a chunk's jobs this bulk action did not change (they had moved on, or are gone):
-- those without an audit row of its bulk id.
SELECT coalesce(array_agg(x.id ORDER BY x.n), '{}') AS job_ids
FROM unnest(%(job_ids)s::bigint[]) WITH ORDINALITY AS x (id, n)
WHERE NOT EXISTS (SELECT 1 FROM job_audit a
                  WHERE a.job_id = x.id AND a.bulk_id = %(bulk_id)s::uuid);

-- name: console_bulk_step_record
-- Record a chunk done and move the action on past it (compare-and-set on next_ord, in the
-- chunk's transaction); the last chunk ends the action.
WITH step AS (
    INSERT INTO console_bulk_steps (selection_id, first_ord, last_ord, changed, left_alone)
    VALUES (%(id)s::uuid, %(lo)s::int, %(hi)s::int, %(changed)s::int, %(left_alone)s::bigint[])
    RETURNING selection_id
)
UPDATE console_selections s
SET next_ord = %(hi)s::int,
    changed = s.changed + %(changed)s::int,
    left_alone = s.left_alone + cardinality(%(left_alone)s::bigint[]),
    state = CASE WHEN %(hi)s::int >= s.jobs THEN 'done' ELSE s.state END,
    finished_at = CASE WHEN %(hi)s::int >= s.jobs THEN now() END
FROM step
WHERE s.id = step.selection_id AND s.next_ord = %(lo)s::int
RETURNING s.state;

-- name: console_bulk_canary_lock
-- The operator's action waiting at its canary (every chunk of the canary done), its row
-- locked for the rest of the transaction: a stop, a chunk or another continue of it waits
-- until this decision commits. No row: it is not waiting there.
SELECT id, action, reason, state, jobs, canary, next_ord,
       EXISTS (SELECT 1 FROM console_selection_jobs p WHERE p.selection_id = s.id) AS held
FROM console_selections s
WHERE id = %(id)s::uuid AND actor = %(actor)s::text AND state = 'canary'
  AND next_ord >= canary
FOR UPDATE OF s;

-- name: console_bulk_continue
-- After the canary: act on the rest (compare-and-set on the state), audited in the same
-- statement as a row of no job (who, when, and in `details` how the canary stood when
-- the operator went on: `canary_failed`, `failed_again`, their codes).
WITH continued AS (
    UPDATE console_selections SET state = 'running'
    WHERE id = %(id)s::uuid AND actor = %(actor)s::text AND state = 'canary'
      AND next_ord >= canary
    RETURNING id, action, reason, canary, jobs
), audit AS (
    INSERT INTO job_audit (bulk_id, actor, role, action, reason, request_id, details)
    SELECT id, %(actor)s::text, %(role)s::text, 'continue_bulk', reason, NULL,
           jsonb_build_object('bulk_action', action, 'canary', canary, 'jobs', jobs)
           || %(verdict)s::jsonb
    FROM continued
    RETURNING bulk_id
)
SELECT bulk_id AS id FROM audit;

-- name: console_bulk_stop
-- Stop a started action where it is: the chunks done stay done, no other starts. Audited
-- in the same statement (who, why, when; what: the bulk id, its action and how far it
-- got), with no job of its own: the bulk's summary counts only the jobs it changed.
WITH was AS (
    SELECT id, state FROM console_selections
    WHERE id = %(id)s::uuid AND actor = %(actor)s::text AND state IN ('canary', 'running')
    FOR UPDATE
), stopped AS (
    UPDATE console_selections s SET state = 'stopped', finished_at = now()
    FROM was WHERE s.id = was.id
    RETURNING s.id, s.action, s.next_ord, s.jobs, was.state AS state_was
), audit AS (
    INSERT INTO job_audit (bulk_id, actor, role, action, reason, request_id, details)
    SELECT id, %(actor)s::text, %(role)s::text, 'stop_bulk', %(reason)s::text,
           %(request_id)s::text,
           jsonb_build_object('bulk_action', action, 'state_was', state_was,
                              'dealt_with', next_ord, 'jobs', jobs)
    FROM stopped
    RETURNING bulk_id
)
SELECT bulk_id AS id FROM audit;

-- name: console_bulk_left_alone_sample
-- The first of the jobs the action's chunks left alone, in the order they were met.
SELECT coalesce((array_agg(x.id ORDER BY s.first_ord, x.n))[1:%(limit)s::int], '{}')
       AS job_ids
FROM console_bulk_steps s
CROSS JOIN LATERAL unnest(s.left_alone) WITH ORDINALITY AS x (id, n)
WHERE s.selection_id = %(id)s::uuid;

-- name: console_bulk_unfinished
-- Bulk actions started and not yet done or stopped, newest first (the audit log).
SELECT id, actor, action, description, state, jobs, canary, next_ord, used_at
FROM console_selections
WHERE state IN ('canary', 'running')
ORDER BY created_at DESC
LIMIT %(limit)s::int;

-- name: console_selection_prune
-- Let go of the ids of selections nobody will act on: never started and made over a
-- day ago, or finished over a week ago (the selection row, its totals and steps stay).
DELETE FROM console_selection_jobs p
USING console_selections s
WHERE p.selection_id = s.id
  AND ((s.used_at IS NULL AND s.created_at < now() - interval '1 day')
       OR (s.state IN ('done', 'stopped') AND s.finished_at < now() - interval '7 days'));

-- Flows: jobs that wait for their parents (worker/jobs/flows.py, docs/guide/flows.md).
-- A waiting job counts its edges not yet released (`waiting_on`); an edge is released
-- once (`released_at`), by the statement that gives its parent a status that satisfies
-- it (finish_executions, or the statements here), and the count is decremented under
-- the dependent's row lock: never recounted from a snapshot, which two parents
-- finishing at once would each read with the other unfinished.

-- name: flow_lock_parents
-- The existing parents of jobs being enqueued, locked in id order until the caller's
-- transaction ends: a finish of one of them waits for the enqueue (and then releases
-- the new edges), or the enqueue waits for the finish (and reads its status here).
SELECT id, status FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[])
ORDER BY id
FOR NO KEY UPDATE

-- name: flow_add_edges
-- Write the edges of jobs just inserted (parallel arrays, one element per edge), count
-- them on their parents, and move each dependent to `waiting` with the number of its
-- edges its parent does not satisfy yet (a dependent whose parents all completed stays
-- pending). Every parent is locked (flow_lock_parents) or was inserted by this
-- transaction, so the statuses read here hold until it commits. One UPDATE for parents
-- and dependents alike: a job of the call may be both, and a statement updates a row once.
WITH edge AS (
    SELECT e.*, (p.status = 'completed' OR (e.run_anyway AND p.status IN
                 ('failed', 'cancelled', 'skipped'))) AS satisfied
    FROM unnest(%(job_ids)s::bigint[], %(parent_ids)s::bigint[], %(run_anyway)s::bool[])
         AS e(job_id, parent_id, run_anyway)
    JOIN background_jobs p ON p.id = e.parent_id
), added AS (
    INSERT INTO job_dependencies (job_id, parent_id, run_anyway, released_at)
    SELECT job_id, parent_id, run_anyway, CASE WHEN satisfied THEN now() END FROM edge
), counted AS (
    SELECT id, sum(edges) AS edges, sum(held) AS held
    FROM (SELECT parent_id, 1, 0 FROM edge
          UNION ALL
          SELECT job_id, 0, CASE WHEN satisfied THEN 0 ELSE 1 END FROM edge)
         AS c(id, edges, held)
    GROUP BY id
), moved AS (
    UPDATE background_jobs j
    SET dependents = j.dependents + c.edges, waiting_on = j.waiting_on + c.held,
        status = CASE WHEN c.held > 0 THEN 'waiting' ELSE j.status END
    FROM counted c WHERE j.id = c.id
    RETURNING c.held
)
SELECT count(*) FILTER (WHERE held > 0) AS waiting FROM moved

-- name: release_dependents
-- Release the dependents of `parent_ids` whose edges their parents' statuses satisfy now
-- (as finish_executions does: a finish that could not see an enqueue's edges, an
-- operator's completion, the repair duty), and with `as_completed` every edge of those
-- that are cancelled or skipped (an operator who cancels or skips a parent and
-- releases its dependents). Returns the jobs moved to pending.
WITH released AS (
    UPDATE job_dependencies e SET released_at = now()
    FROM background_jobs p
    WHERE p.id = ANY(%(parent_ids)s::bigint[]) AND e.parent_id = p.id
      AND e.released_at IS NULL
      AND (p.status = 'completed'
           OR (e.run_anyway AND p.status IN ('failed', 'cancelled', 'skipped'))
           OR (%(as_completed)s::bool AND p.status IN ('cancelled', 'skipped')))
    RETURNING e.job_id
), freed AS (
    -- Every dependent, whatever its status, as finish_executions does (an operator's
    -- retry may be moving it back to waiting).
    UPDATE background_jobs d
    SET waiting_on = d.waiting_on - r.n,
        status = CASE WHEN d.status = 'waiting' AND d.waiting_on <= r.n THEN 'pending'
                      ELSE d.status END,
        available_at = greatest(d.available_at, now())
    FROM (SELECT job_id, count(*) AS n FROM released GROUP BY job_id) r
    WHERE d.id = r.job_id
    RETURNING d.id, d.queue, d.status
)
SELECT id, pg_notify('jobwarden_jobs', queue) FROM freed WHERE status = 'pending'
ORDER BY id

-- name: cancel_dependents
-- Cancel, with the operator's audit, the waiting jobs that can no longer run because
-- the cancelled or skipped `parent_ids` will never complete: their dependents through
-- edges that are not `run_anyway`, and theirs in turn. Returns the jobs cancelled (the
-- caller then releases the `run_anyway` edges of all of them: release_dependents).
WITH RECURSIVE below(id) AS (
    SELECT e.job_id FROM job_dependencies e JOIN background_jobs p ON p.id = e.parent_id
    WHERE p.id = ANY(%(parent_ids)s::bigint[]) AND p.status IN ('cancelled', 'skipped')
      AND NOT e.run_anyway AND e.released_at IS NULL
    UNION
    SELECT e.job_id FROM job_dependencies e JOIN below b ON e.parent_id = b.id
    WHERE NOT e.run_anyway AND e.released_at IS NULL
), target AS (
    SELECT j.id FROM background_jobs j JOIN below b ON b.id = j.id
    WHERE j.status = 'waiting'
    ORDER BY j.id
    FOR UPDATE OF j
), updated AS (
    UPDATE background_jobs j
    SET status = 'cancelled', cancelled_at = now(), last_error_code = 'CANCELLED',
        last_error = 'cancelled with its parent by an operator'
    FROM target t WHERE j.id = t.id AND j.status = 'waiting'
    RETURNING j.id
), audit AS (
    INSERT INTO job_audit
        (job_id, bulk_id, actor, role, action, reason, from_status, to_status, request_id,
         details)
    SELECT id, %(bulk_id)s::uuid, %(actor)s::text, %(role)s::text, 'cancel',
           %(reason)s::text, 'waiting', 'cancelled', %(request_id)s::text,
           jsonb_build_object('with_parents', %(parent_ids)s::bigint[])
    FROM updated
)
SELECT id FROM updated ORDER BY id

-- name: flow_unreleased_parents
-- Parents whose edges their status satisfies but were never released (a parent
-- finished by a runtime from before flows, a release lost between two statements), for
-- the repair duty (worker/duties/flows.py); at most `limit`.
SELECT DISTINCT e.parent_id
FROM job_dependencies e JOIN background_jobs p ON p.id = e.parent_id
WHERE e.released_at IS NULL
  AND (p.status = 'completed'
       OR (e.run_anyway AND p.status IN ('failed', 'cancelled', 'skipped')))
LIMIT %(limit)s

-- name: flow_release_stray
-- Waiting jobs with no edge left to wait for (waiting_on at zero: written so by hand or
-- by a bug): pending now. The repair duty's second step.
UPDATE background_jobs SET status = 'pending', waiting_on = 0,
       available_at = greatest(available_at, now())
WHERE status = 'waiting' AND waiting_on <= 0
RETURNING id, pg_notify('jobwarden_jobs', queue)

-- name: flow_parent_results
-- What the parents of a job returned: (parent id, type, status, result), by parent id.
SELECT p.id, p.type, p.status, p.result
FROM job_dependencies e JOIN background_jobs p ON p.id = e.parent_id
WHERE e.job_id = %(job_id)s
ORDER BY p.id

-- Flows in the console (console/data/flows.py, docs/guide/flows.md): the jobs connected
-- to one job by dependency edges, what holds its waiting jobs, and what an operator's
-- cancel or skip would do to the dependents of the jobs it acts on.

-- name: console_flow_walk
-- The jobs connected to `job_id` through edges followed both ways, the job itself
-- first; at most `limit` of them. UNION keeps each job once, so the walk ends however
-- the edges run (a cycle inserted by hand included), and the recursive query is read
-- only as far as the LIMIT: a flow of a million jobs costs `limit` of them.
WITH RECURSIVE walk(id) AS (
    SELECT id FROM background_jobs WHERE id = %(job_id)s::bigint
    UNION
    SELECT CASE WHEN e.job_id = w.id THEN e.parent_id ELSE e.job_id END
    FROM walk w
    JOIN job_dependencies e ON e.job_id = w.id OR e.parent_id = w.id
)
SELECT id FROM walk
LIMIT %(limit)s::int;

-- name: console_flow_nodes
-- The jobs of a walked flow, with what the graph draws of them.
SELECT id, type, queue, status, waiting_on, dependents, created_at
FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[])
ORDER BY id;

-- name: console_flow_edges
-- The edges between jobs of a walked flow (one end outside it: a flow cut at its bound).
SELECT e.job_id, e.parent_id, e.run_anyway, e.released_at IS NOT NULL AS released
FROM job_dependencies e
WHERE e.job_id = ANY(%(ids)s::bigint[]) AND e.parent_id = ANY(%(ids)s::bigint[]);

-- name: console_flow_held
-- What holds a flow: waiting jobs (of `ids`; every waiting job when NULL) with an edge not
-- released whose parent ended in a way that lets no edge of its go by itself — failed,
-- cancelled or skipped (a run_anyway edge is released by those), or unknown (which holds
-- every edge until an operator reconciles it). One row per (held job, parent), the
-- longest held first; `held_since`: when the parent ended so (an unknown one: its last
-- heartbeat), or the held job's creation if later.
SELECT d.id, d.type, d.queue, p.id AS parent_id, p.type AS parent_type,
       p.status AS parent_status, p.last_error_code AS parent_error_code,
       greatest(d.created_at, coalesce(CASE p.status
                    WHEN 'failed' THEN p.failed_at
                    WHEN 'cancelled' THEN p.cancelled_at
                    WHEN 'skipped' THEN p.skipped_at
                    ELSE coalesce(p.heartbeat_at, p.started_at) END, p.created_at))
           AS held_since
FROM background_jobs d
JOIN job_dependencies e ON e.job_id = d.id AND e.released_at IS NULL
JOIN background_jobs p ON p.id = e.parent_id
WHERE d.status = 'waiting'
  AND (%(ids)s::bigint[] IS NULL OR d.id = ANY(%(ids)s::bigint[]))
  AND (p.status = 'unknown'
       OR (NOT e.run_anyway AND p.status IN ('failed', 'cancelled', 'skipped')))
ORDER BY held_since, d.id, p.id
LIMIT %(limit)s::int;

-- name: metrics_flow_held
-- Per type: how many of its waiting jobs a parent that failed, was cancelled or skipped,
-- or ended unknown holds (console_flow_held's condition), and the longest held (seconds).
-- Every published type and every type with a waiting job gets a row, at 0 when none is
-- held, so an alert's series exists before the first hold. `longest_id`: the job held
-- longest (the console's Alerts panel links to its flow).
WITH held AS (
    SELECT d.id, d.type, min(greatest(d.created_at, coalesce(CASE p.status
               WHEN 'failed' THEN p.failed_at
               WHEN 'cancelled' THEN p.cancelled_at
               WHEN 'skipped' THEN p.skipped_at
               ELSE coalesce(p.heartbeat_at, p.started_at) END, p.created_at))) AS held_since
    FROM background_jobs d
    JOIN job_dependencies e ON e.job_id = d.id AND e.released_at IS NULL
    JOIN background_jobs p ON p.id = e.parent_id
    WHERE d.status = 'waiting'
      AND (p.status = 'unknown'
           OR (NOT e.run_anyway AND p.status IN ('failed', 'cancelled', 'skipped')))
    GROUP BY d.id, d.type
)
SELECT t.type, count(h.id) AS held,
       coalesce(extract(epoch FROM now() - min(h.held_since)), 0) AS held_s,
       (array_agg(h.id ORDER BY h.held_since, h.id) FILTER (WHERE h.id IS NOT NULL))[1]
           AS longest_id
FROM (SELECT type FROM job_types
      UNION SELECT type FROM background_jobs WHERE status = 'waiting') t
LEFT JOIN held h ON h.type = t.type
GROUP BY t.type
ORDER BY t.type;

-- name: console_held_waiting
-- How many waiting jobs are held (console_flow_held's condition): the overview's note.
SELECT count(*) AS held
FROM background_jobs d
WHERE d.status = 'waiting'
  AND EXISTS (SELECT 1 FROM job_dependencies e JOIN background_jobs p ON p.id = e.parent_id
              WHERE e.job_id = d.id AND e.released_at IS NULL
                AND (p.status = 'unknown'
                     OR (NOT e.run_anyway AND p.status IN ('failed', 'cancelled', 'skipped'))));

-- name: console_dependents_preview
-- What an operator's cancel or skip would do to the jobs waiting for the jobs it acts on:
-- `job_ids` (one job's page) or the jobs of the selection `selection_id`, those now in
-- one of `from_statuses` (the rest would be left alone), themselves left out of the
-- counts (the action acts on them). `held`: the waiting jobs an edge of theirs not
-- released and not run_anyway holds (they stay waiting: "hold"); `released`: the waiting
-- jobs with any edge of theirs not released ("release" lets those edges go); `start`:
-- those with no other edge left, which would run at once; `cancelled`: the waiting jobs
-- "cancel" reaches through edges not released and not run_anyway, and theirs in turn
-- (as worker/store/sql/flows.sql's cancel_dependents walks them).
WITH RECURSIVE acted AS (
    SELECT j.id FROM background_jobs j
    WHERE j.status = ANY(%(from_statuses)s::text[])
      AND (j.id = ANY(%(job_ids)s::bigint[])
           OR j.id IN (SELECT unnest(p.job_ids) FROM console_selection_jobs p
                       WHERE p.selection_id = %(selection_id)s::uuid))
), direct AS (
    SELECT DISTINCT e.job_id, bool_and(e.run_anyway) OVER (PARTITION BY e.job_id) AS anyway
    FROM job_dependencies e JOIN background_jobs d ON d.id = e.job_id
    WHERE e.parent_id IN (SELECT id FROM acted) AND e.released_at IS NULL
      AND d.status = 'waiting' AND d.id NOT IN (SELECT id FROM acted)
), below(id) AS (
    SELECT e.job_id FROM job_dependencies e
    WHERE e.parent_id IN (SELECT id FROM acted) AND NOT e.run_anyway AND e.released_at IS NULL
    UNION
    SELECT e.job_id FROM job_dependencies e JOIN below b ON e.parent_id = b.id
    WHERE NOT e.run_anyway AND e.released_at IS NULL
)
SELECT (SELECT count(*) FROM direct WHERE NOT anyway) AS held,
       (SELECT count(*) FROM direct) AS released,
       (SELECT count(*) FROM direct d
        WHERE NOT EXISTS (SELECT 1 FROM job_dependencies o
                          WHERE o.job_id = d.job_id AND o.released_at IS NULL
                            AND o.parent_id NOT IN (SELECT id FROM acted))) AS start,
       (SELECT count(*) FROM background_jobs d JOIN below b ON b.id = d.id
        WHERE d.status = 'waiting' AND d.id NOT IN (SELECT id FROM acted)) AS cancelled;

-- Batches in the console (console/data/batches.py, docs/guide/flows.md#batches): a batch's
-- counts and moments as the runtime keeps them on its row, its callbacks and the jobs they
-- became, and the list of batches. No query here reads the members' rows: a batch page
-- costs the same for 10 members and for a million (its member list is the jobs list's
-- `batch=` filter).

-- name: console_batch_get
-- One batch: its counts by final state (kept by the runtime under the batch's row lock,
-- worker/store/sql/batches.sql's batch_count; an operator's action counts the members
-- it moved in its own transaction) and `unfinished`, the members not in one (pending,
-- waiting, running). `sealed_at`: when on_complete came due; it takes no member after.
SELECT b.id, b.description, b.owner, b.created_at, b.closed_at, b.failure_at,
       b.complete_at AS sealed_at, b.success_at, b.members, b.completed, b.failed,
       b.cancelled, b.skipped, b.unknown,
       b.members - b.completed - b.failed - b.cancelled - b.skipped - b.unknown AS unfinished
FROM job_batches b
WHERE b.id = %(batch_id)s::bigint;

-- name: console_batch_callbacks
-- A batch's callbacks, in the order they are named (on_complete, on_success,
-- on_failure): the type and queue enqueue resolved, when it came due (the batch's moment
-- of its event; NULL: not yet) and the job it became, with that job's status now (NULL
-- for a job retention removed).
SELECT k.event, k.type, k.queue, k.job_id, j.status AS job_status,
       CASE k.event WHEN 'complete' THEN b.complete_at
                    WHEN 'success' THEN b.success_at
                    ELSE b.failure_at END AS due_at
FROM job_batch_callbacks k
JOIN job_batches b ON b.id = k.batch_id
LEFT JOIN background_jobs j ON j.id = k.job_id
WHERE k.batch_id = %(batch_id)s::bigint
ORDER BY array_position(ARRAY['complete', 'success', 'failure'], k.event);

-- name: console_batches_page
-- One keyset page of batches, newest first, of one owner key or of any; older than
-- `before_id`: an owner's batches come in order from job_batches_owner_idx (owner, id),
-- every batch from the primary key read backwards. Each row carries its counts.
SELECT b.id, b.description, b.owner, b.created_at, b.closed_at, b.failure_at,
       b.complete_at AS sealed_at, b.success_at, b.members, b.completed, b.failed,
       b.cancelled, b.skipped, b.unknown,
       b.members - b.completed - b.failed - b.cancelled - b.skipped - b.unknown AS unfinished
FROM job_batches b
WHERE (%(owner)s::text IS NULL OR b.owner = %(owner)s::text)
  AND (%(before_id)s::bigint IS NULL OR b.id < %(before_id)s::bigint)
ORDER BY b.id DESC
LIMIT %(limit)s::int;

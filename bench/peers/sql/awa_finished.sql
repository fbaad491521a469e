-- awa-pg's successful finishes on the database clock (epoch seconds), one row a job, read
-- from its queue-storage tables (schema `awa`), as its own terminal_jobs view does, without
-- that view's join back to the ready rows (which took minutes on 50,000 jobs).
-- A short attempt's completion is written in a batch: one receipt_completion_batches row
-- for many jobs, its finalized_at the clock when that batch was written, so each job's
-- finish is when its completion was recorded, as for every other system. A completion
-- tombstoned since is no longer a finish. Jobs that finished another way (a long
-- attempt, a retry) are rows of done_entries with their own finalized_at.
SELECT extract(epoch FROM done.finalized_at)
FROM awa.done_entries AS done
WHERE done.state = 'completed'
UNION ALL
SELECT extract(epoch FROM batch.finalized_at)
FROM awa.receipt_completion_batches AS batch
CROSS JOIN LATERAL unnest(batch.job_ids, batch.run_leases) AS item(job_id, run_lease)
WHERE NOT EXISTS (
    SELECT 1 FROM awa.receipt_completion_tombstones AS tomb
    WHERE tomb.ready_slot = batch.ready_slot
      AND tomb.ready_generation = batch.ready_generation
      AND tomb.job_id = item.job_id AND tomb.run_lease = item.run_lease)

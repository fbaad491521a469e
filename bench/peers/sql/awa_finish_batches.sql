-- awa-pg's successful finishes grouped as they are written, for a harness that keeps what
-- it has seen (scenarios.Finishes): awa truncates a ready slot's completion records once
-- its ring of 16 slots comes round to it again (about 16 s at the default rotation), so
-- in a scenario longer than that the early finishes are gone from its tables by the end.
-- One row a completion batch (its key, how many of its jobs are still finishes, the
-- clock when it was written) and one a job of done_entries; awa_finished.sql says why
-- these are the finishes.
SELECT 'd ' || done.job_id || ' ' || done.run_lease, 1, extract(epoch FROM done.finalized_at)
FROM awa.done_entries AS done
WHERE done.state = 'completed'
UNION ALL
SELECT 'b ' || batch.ready_slot || ' ' || batch.ready_generation || ' ' || batch.batch_id,
       batch.completed_count - (
           SELECT count(*) FROM unnest(batch.job_ids, batch.run_leases) AS item(job_id, run_lease)
           JOIN awa.receipt_completion_tombstones AS tomb
             ON tomb.ready_slot = batch.ready_slot
            AND tomb.ready_generation = batch.ready_generation
            AND tomb.job_id = item.job_id AND tomb.run_lease = item.run_lease),
       extract(epoch FROM batch.finalized_at)
FROM awa.receipt_completion_batches AS batch

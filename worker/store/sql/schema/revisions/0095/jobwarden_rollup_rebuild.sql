-- Recount everything from the records of how work ended (demo data, repair after a
-- restore; migration 0019): every finished execution but a hand-back, by its recorded
-- outcome; every operator move to an outcome; jobs in an outcome with neither record.
CREATE OR REPLACE FUNCTION jobwarden_rollup_rebuild() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE background_jobs IN SHARE MODE;
    DELETE FROM job_count_deltas;
    DELETE FROM job_minute_counts;
    INSERT INTO job_count_deltas (status, queue, type, jobs)
    SELECT jobwarden_counted_status(status), queue, type, count(*)
    FROM background_jobs
    GROUP BY 1, 2, 3;
    INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
    SELECT date_trunc('minute', at), queue, type, outcome,
           CASE WHEN outcome IN ('failed', 'unknown', 'retried')
                THEN coalesce(error_code, '') ELSE '' END,
           count(*)
    FROM (
        SELECT e.finished_at AS at, e.queue, e.type, e.error_code,
               CASE WHEN e.outcome = 'retry' THEN 'retried'
                    WHEN e.outcome NOT IN ('worker_lost', 'timeout') THEN e.outcome
                    WHEN coalesce(op.from_status,
                                  CASE WHEN nxt.started_at IS NOT NULL
                                       THEN 'pending' END,
                                  j.status) IN ('pending', 'running') THEN 'retried'
                    ELSE coalesce(op.from_status, j.status) END AS outcome
        FROM job_executions e
        JOIN background_jobs j ON j.id = e.job_id
        LEFT JOIN LATERAL (
            SELECT min(n.started_at) AS started_at FROM job_executions n
            WHERE n.job_id = e.job_id AND n.started_at > e.started_at
        ) nxt ON e.outcome IN ('worker_lost', 'timeout')
        LEFT JOIN LATERAL (
            SELECT a.from_status FROM job_audit a
            WHERE a.job_id = e.job_id AND a.at >= e.finished_at
              AND (nxt.started_at IS NULL OR a.at < nxt.started_at)
            ORDER BY a.at, a.id LIMIT 1
        ) op ON e.outcome IN ('worker_lost', 'timeout')
        WHERE e.finished_at > now() - interval '8 days'
          AND e.outcome <> 'handed_back'
        UNION ALL
        SELECT a.at, j.queue, j.type, j.last_error_code, a.to_status
        FROM job_audit a JOIN background_jobs j ON j.id = a.job_id
        WHERE a.at > now() - interval '8 days'
          AND a.from_status IS DISTINCT FROM a.to_status
          AND a.to_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
        UNION ALL
        SELECT jobwarden_finished_at(j.status, j.completed_at, j.failed_at,
                                     j.cancelled_at, j.skipped_at, j.created_at),
               j.queue, j.type, j.last_error_code, j.status
        FROM background_jobs j
        WHERE j.status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
          AND NOT EXISTS (SELECT 1 FROM job_executions e WHERE e.job_id = j.id)
          AND NOT EXISTS (SELECT 1 FROM job_audit a WHERE a.job_id = j.id)
        UNION ALL
        -- Expired after earlier records (migration 0081): failed, code EXPIRED, with no
        -- execution or operator action at or after its failure (those would have ended
        -- it); the jobs with no record at all are counted just above.
        SELECT j.failed_at, j.queue, j.type, j.last_error_code, 'failed'
        FROM background_jobs j
        WHERE j.status = 'failed' AND j.last_error_code = 'EXPIRED'
          AND (EXISTS (SELECT 1 FROM job_executions e WHERE e.job_id = j.id)
               OR EXISTS (SELECT 1 FROM job_audit a WHERE a.job_id = j.id))
          AND NOT EXISTS (SELECT 1 FROM job_executions e
                          WHERE e.job_id = j.id AND e.finished_at >= j.failed_at)
          AND NOT EXISTS (SELECT 1 FROM job_audit a
                          WHERE a.job_id = j.id AND a.at >= j.failed_at)
    ) o
    WHERE at > now() - interval '8 days'
    GROUP BY 1, 2, 3, 4, 5;
END $$;

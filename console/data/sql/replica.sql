-- The read replica's queries (console/data/replica.py is the only caller): where the
-- primary's WAL is, how far a standby has replayed it, and which server each one is.

-- name: console_replica_primary_position
-- The primary's side of a lag reading: its WAL position and clock now, and which cluster
-- and database it is (a standby of it has the same system identifier and database name).
SELECT pg_current_wal_lsn()::text AS lsn,
       clock_timestamp() AS at,
       (SELECT system_identifier FROM pg_control_system())::text AS system_id,
       current_database() AS dbname;

-- name: console_replica_written
-- Where the primary's written WAL ends after an action committed (synchronously, as the
-- console's commits are unless the server's default says otherwise): a standby that has
-- replayed up to here shows it. Not the insert position: at a page's start it points
-- past the page header, where a standby that replayed everything may never report.
SELECT pg_current_wal_lsn()::text AS lsn;

-- name: console_replica_position
-- The standby's side, read with the primary's position (`primary_lsn`, `primary_at`):
-- lag 0 when it has replayed everything the primary had written, else the time from its
-- last replayed commit to the primary's clock (both the primary's clock: no skew), an
-- upper bound of what its figures miss. `written`: the user's last action's position
-- (NULL: none), which its pages must show. On a server not in recovery the replay
-- functions are NULL, and so is every figure.
SELECT pg_is_in_recovery() AS standby,
       (SELECT system_identifier FROM pg_control_system())::text AS system_id,
       current_database() AS dbname,
       greatest(pg_wal_lsn_diff(%(primary_lsn)s::pg_lsn, pg_last_wal_replay_lsn()),
                0)::bigint AS behind_bytes,
       CASE WHEN pg_last_wal_replay_lsn() >= %(primary_lsn)s::pg_lsn THEN 0
            ELSE greatest(extract(epoch FROM %(primary_at)s::timestamptz
                                             - pg_last_xact_replay_timestamp()), 0)
       END::float8 AS lag_s,
       coalesce(pg_last_wal_replay_lsn() >= %(written)s::pg_lsn, true) AS shows_written;

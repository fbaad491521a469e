-- Finding an old job (console/data/find.py): where a moment falls among the ids, for the
-- jobs list's and the search's time range and jump to a date.

-- name: console_ids_at
-- For each of `moments` (n: its place in the array, from 1), the id where it splits the
-- jobs: those below it were created before it, the others at or after it. The ids are
-- handed out in the order jobs are inserted, and a job's
-- created_at is its enqueuing transaction's start, so created_at grows with the id but
-- for the time such a transaction stays open (find.py adds a margin for that). Found by
-- halving the range of ids, each step one probe of the primary key (the first job at or
-- above the middle): about 2 log2(ids) probes whatever the number of jobs, never a read
-- of the jobs in between. `id`: one past the newest job when none is that recent (1 in
-- an empty table); it may be an id no job has (ids deleted by retention leave gaps: a
-- step that finds no job in the upper half drops it).
WITH RECURSIVE ends AS (
    SELECT (SELECT id FROM background_jobs ORDER BY id LIMIT 1) AS first,
           (SELECT id FROM background_jobs ORDER BY id DESC LIMIT 1) AS last
), halving (n, at, lo, hi) AS (
    SELECT m.n, m.at, coalesce(e.first, 1), coalesce(e.last, 0) + 1
    FROM unnest(%(moments)s::timestamptz[]) WITH ORDINALITY AS m (at, n)
    CROSS JOIN ends e
    UNION ALL
    SELECT h.n, h.at,
           CASE WHEN p.id < h.hi AND p.created_at < h.at THEN p.id + 1 ELSE h.lo END,
           CASE WHEN p.id IS NULL OR p.id >= h.hi THEN h.lo + (h.hi - h.lo) / 2
                WHEN p.created_at >= h.at THEN p.id
                ELSE h.hi END
    FROM halving h
    LEFT JOIN LATERAL (
        SELECT id, created_at FROM background_jobs
        WHERE id >= h.lo + (h.hi - h.lo) / 2
        ORDER BY id
        LIMIT 1
    ) p ON true
    WHERE h.lo < h.hi
)
SELECT n, hi AS id FROM halving WHERE lo >= hi ORDER BY n;

-- name: console_sort_setting
-- Turn the planner's sorts on or off for the rest of this transaction (`value`: 'on' or
-- 'off'), returning what it was. A page of a time range walks its ids in order: without
-- statistics the planner multiplies the default selectivities of the range's four bounds
-- and the filters into a handful of rows, and would read every job of the range to sort
-- them (9,000 pages for a range of 200,000 jobs; the whole table at 10,000,000 for a wide
-- range), where the walk of an index in id order stops at the page's last row.
SELECT current_setting('enable_sort') AS was, set_config('enable_sort', %(value)s, true) AS now;

-- name: console_suggest_names
-- The job types and queues a filter can name (console/data/suggest.py): those the
-- workers published (job_types), those of jobs now (the rollup of migration 0009, summed
-- as the overview sums it), the queues an operator paused: at most `limit` of each,
-- never a read of background_jobs.
WITH live AS (
    SELECT queue, type FROM job_count_deltas
    GROUP BY status, queue, type
    HAVING sum(jobs) <> 0
), names AS (
    SELECT 'type' AS kind, type AS value FROM job_types
    UNION SELECT 'type', type FROM live
    UNION SELECT 'queue', queue FROM job_types
    UNION SELECT 'queue', queue FROM live
    UNION SELECT 'queue', queue FROM queue_controls
), ranked AS (
    SELECT kind, value, row_number() OVER (PARTITION BY kind ORDER BY value) AS n
    FROM names
)
SELECT kind, value FROM ranked WHERE n <= %(limit)s::int ORDER BY kind, value;

-- name: console_suggest_codes
-- The error codes a filter can name: those of failed jobs now (one probe of their
-- partial index per code: a skip over the codes, not a read of their jobs), and those
-- the per-minute rollup saw in its 8 days (retries and unknown outcomes included, one
-- probe of its error index per code), in order, at most `limit` in all.
WITH RECURSIVE failed AS (
    (SELECT last_error_code AS code FROM background_jobs
     WHERE status = 'failed' AND last_error_code IS NOT NULL
     ORDER BY last_error_code LIMIT 1)
    UNION ALL
    SELECT (SELECT j.last_error_code FROM background_jobs j
            WHERE j.status = 'failed' AND j.last_error_code > f.code
            ORDER BY j.last_error_code LIMIT 1)
    FROM failed f WHERE f.code IS NOT NULL
), seen AS (
    (SELECT error_code AS code FROM job_minute_counts
     WHERE error_code <> '' ORDER BY error_code LIMIT 1)
    UNION ALL
    SELECT (SELECT m.error_code FROM job_minute_counts m
            WHERE m.error_code <> '' AND m.error_code > s.code
            ORDER BY m.error_code LIMIT 1)
    FROM seen s WHERE s.code IS NOT NULL
)
SELECT code FROM (SELECT code FROM failed WHERE code IS NOT NULL LIMIT %(limit)s::int) f
UNION
SELECT code FROM (SELECT code FROM seen WHERE code IS NOT NULL LIMIT %(limit)s::int) s
ORDER BY code
LIMIT %(limit)s::int;

-- name: console_suggest_payload_paths
-- Field paths (at most `depth` names deep, objects only) in the payloads of the newest
-- `sample` jobs, each payload at most `max_bytes` as stored: a bounded read of the
-- primary key's newest end, whatever the number of jobs. `jobs`: how many of the sample
-- hold the path. A type that nobody enqueued lately is not in the sample.
WITH RECURSIVE sample AS (
    SELECT payload FROM (
        SELECT payload FROM background_jobs ORDER BY id DESC LIMIT %(sample)s::int
    ) newest
    WHERE pg_column_size(payload) <= %(max_bytes)s::int
), fields (path, value, depth, n) AS (
    SELECT ARRAY[e.key], e.value, 1, s.n
    FROM (SELECT payload, row_number() OVER () AS n FROM sample) s
    CROSS JOIN LATERAL jsonb_each(s.payload) e
    UNION ALL
    SELECT f.path || e.key, e.value, f.depth + 1, f.n
    FROM fields f
    -- (an empty object for the others: the filter below may run after the call)
    CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(f.value) = 'object'
                                       THEN f.value ELSE '{}' END) e
    WHERE f.depth < %(depth)s::int
)
SELECT path, count(DISTINCT n) AS jobs
FROM fields
WHERE jsonb_typeof(value) NOT IN ('object', 'array')
GROUP BY path
ORDER BY count(DISTINCT n) DESC, path
LIMIT %(limit)s::int;

-- name: console_suggest_time_limit
-- How long each statement of this transaction may run (milliseconds): a filter's
-- suggestions are a convenience, never worth holding a page up for (a table locked by a
-- migration, a busy server): past it the page has none.
SELECT set_config('statement_timeout', %(ms)s::text, true) AS statement_timeout;

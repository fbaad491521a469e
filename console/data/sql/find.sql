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


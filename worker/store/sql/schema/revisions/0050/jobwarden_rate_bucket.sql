-- The bucket a job of `type` draws from: the type's, or with a key path
-- ('account.id'), the type's bucket of that payload value (a job without it:
-- the bucket of the empty key).
CREATE OR REPLACE FUNCTION jobwarden_rate_bucket(type text, path text, payload jsonb)
    RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'type:' || type || CASE WHEN path IS NULL THEN ''
        ELSE '#' || coalesce(payload #>> string_to_array(path, '.'), '') END
$$;

CREATE TRIGGER job_types_version_seen AFTER INSERT OR UPDATE OF version ON job_types
    FOR EACH ROW EXECUTE FUNCTION jobwarden_type_version_seen();

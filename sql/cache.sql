-- pg_dp: the release cache (hand-written; loaded after bounds.sql). src/pg/cache.rs explains it.

CREATE FUNCTION dp.set_release_cache(tbl regclass, enabled bool) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF enabled IS NULL THEN
        RAISE EXCEPTION 'enabled must be true or false, got NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM dp.relabel_table(tbl, 'no_release_cache', NOT enabled);
END
$$;
COMMENT ON FUNCTION dp.set_release_cache(regclass, bool) IS 'pg_dp: turns the release cache off (false) or back on (true) for a table, partitioned table (with its partitions) or materialized view: DP queries that read it then always release afresh, paid for (dp_admin)';
REVOKE EXECUTE ON FUNCTION dp.set_release_cache(regclass, bool) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.set_release_cache(regclass, bool) TO dp_admin;

CREATE VIEW dp.uncached_tables AS
SELECT l.objoid::pg_catalog.regclass AS table_name
  FROM pg_catalog.pg_seclabel l
 WHERE l.provider = 'pg_dp' AND l.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND l.objsubid = 0
   AND 'no_release_cache' = ANY (pg_catalog.string_to_array(pg_catalog.replace(l.label, ' ', ''), ','));
COMMENT ON VIEW dp.uncached_tables IS 'pg_dp: the tables of this database whose DP queries never reuse a release (dp.set_release_cache)';

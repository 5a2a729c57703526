-- pg_dp: protected tables and trusted roles (hand-written; loaded after dprp.sql).
--
-- A protected table can be read only by DP queries that the query grammar admits, except by
-- superusers, its owner and trusted roles. Protection and trust are security labels of provider
-- pg_dp, so they follow renames and are dumped with the objects; the label hook lets only
-- superusers and members of dp_admin set them. These helpers run as the extension's owner, so that
-- a dp_admin member who does not own a table can protect it.

CREATE FUNCTION dp.protect_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON TABLE %s IS %L', tbl, 'protected');
END
$$;
COMMENT ON FUNCTION dp.protect_table(regclass) IS 'pg_dp: protects a table (and its partitions and inheritance children): from now on only admitted DP queries read it, except superusers, its owner and trusted roles (dp_admin)';

CREATE FUNCTION dp.unprotect_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON TABLE %s IS NULL', tbl);
END
$$;
COMMENT ON FUNCTION dp.unprotect_table(regclass) IS 'pg_dp: removes the protection of a table; roles with SELECT can then read it directly (dp_admin)';

CREATE FUNCTION dp.trust_role(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON ROLE %s IS %L', role, 'trusted');
END
$$;
COMMENT ON FUNCTION dp.trust_role(regrole) IS 'pg_dp: exempts a role (and its members) from table protection in every database: it reads protected tables directly, with its own grants (dp_admin)';

CREATE FUNCTION dp.distrust_role(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON ROLE %s IS NULL', role);
END
$$;
COMMENT ON FUNCTION dp.distrust_role(regrole) IS 'pg_dp: ends the exemption of a role from table protection (dp_admin)';

CREATE VIEW dp.protected_tables AS
SELECT l.objoid::pg_catalog.regclass AS table_name, c.relowner::pg_catalog.regrole AS owner
  FROM pg_catalog.pg_seclabel l
  JOIN pg_catalog.pg_class c ON c.oid = l.objoid
 WHERE l.provider = 'pg_dp' AND l.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass
   AND l.objsubid = 0 AND l.label = 'protected';
COMMENT ON VIEW dp.protected_tables IS 'pg_dp: the tables of this database protected by pg_dp, and their owners';

CREATE VIEW dp.trusted_roles AS
SELECT l.objoid::pg_catalog.regrole AS role_name
  FROM pg_catalog.pg_shseclabel l
 WHERE l.provider = 'pg_dp' AND l.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND l.label = 'trusted';
COMMENT ON VIEW dp.trusted_roles IS 'pg_dp: the roles exempt from table protection (in every database)';

GRANT SELECT ON dp.protected_tables, dp.trusted_roles TO PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.protect_table(regclass) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.unprotect_table(regclass) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.trust_role(regrole) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.distrust_role(regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.protect_table(regclass) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.unprotect_table(regclass) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.trust_role(regrole) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.distrust_role(regrole) TO dp_admin;

-- Cumulative statistics and relation sizes count rows and bytes exactly: the number of rows a DP
-- query read, inserted or deleted, the size of a table. In a database with pg_dp, they are
-- executable by superusers and members of pg_read_all_stats only (grant that role to monitoring
-- roles). A privilege is checked on every path that calls a function (an operator, an aggregate, a
-- domain check, a column default), which a check of the query text alone could not cover.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'pg_catalog'::regnamespace
           AND ((p.proname LIKE 'pg\_stat\_get\_%' AND p.proname <> 'pg_stat_get_activity'
                 AND p.proname NOT LIKE 'pg\_stat\_get\_backend\_%')
                OR p.proname IN ('pg_relation_size', 'pg_table_size', 'pg_total_relation_size', 'pg_indexes_size',
                                 'pg_database_size', 'pg_tablespace_size'))
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pg_read_all_stats', f);
    END LOOP;
END
$$;

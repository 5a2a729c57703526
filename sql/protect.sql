-- pg_dp: protected tables and trusted roles (hand-written; loaded after dprp.sql).
--
-- A protected table can be read only by DP queries that the query grammar admits, except by
-- superusers, its owner and trusted roles. Protection and trust are security labels of provider
-- pg_dp, so they follow renames and are dumped with the objects; the label hook lets only
-- superusers and members of dp_admin set them. These helpers run as the extension's owner, so that
-- a dp_admin member who does not own a table can protect it.

-- A table's pg_dp label is a list of words separated by commas: 'protected', 'no_release_cache'.
-- A Citus table's pg_dp label, sent to every worker, whose shards of the table are protected with it
-- (docs/distributed.md). Citus itself propagates only the labels of roles.
CREATE FUNCTION dp.send_label_to_workers(tbl regclass, label text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    propagated bool;
BEGIN
    EXECUTE 'SELECT coalesce(pg_catalog.bool_and(success), true) FROM pg_catalog.run_command_on_workers($1)'
       INTO propagated
      USING (SELECT pg_catalog.format('SECURITY LABEL FOR pg_dp ON TABLE %I.%I IS %L', n.nspname, c.relname, label)
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl);
    IF NOT propagated THEN
        RAISE EXCEPTION 'the pg_dp label of % could not be set on every Citus worker, so its shards there would not be protected', tbl
              USING ERRCODE = '55000',
                    HINT = 'a table distributed in this transaction is not visible to the workers yet: distribute it (and add nodes) in one transaction and protect it in a later one, before granting it to DP-only roles; check that pg_dp is installed and preloaded on every worker';
    END IF;
END
$$;
COMMENT ON FUNCTION dp.send_label_to_workers(regclass, text) IS 'pg_dp internal: sets a Citus table''s pg_dp label on every worker';
REVOKE EXECUTE ON FUNCTION dp.send_label_to_workers(regclass, text) FROM PUBLIC;

CREATE FUNCTION dp.sync_citus_labels(strict bool DEFAULT true) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('citus.enable_unsupported_feature_messages', 'off', true);
    FOR r IN EXECUTE 'SELECT l.objoid::pg_catalog.regclass AS tbl, l.label FROM pg_catalog.pg_seclabel l
                        JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = l.objoid
                       WHERE l.provider = ''pg_dp'' AND l.classoid = ''pg_catalog.pg_class''::pg_catalog.regclass
                         AND l.objsubid = 0' LOOP
        IF strict THEN
            PERFORM dp.send_label_to_workers(r.tbl, r.label);
        ELSE
            BEGIN
                PERFORM dp.send_label_to_workers(r.tbl, r.label);
            EXCEPTION WHEN object_not_in_prerequisite_state THEN
                RAISE WARNING 'the pg_dp label of % is not yet on every Citus worker', r.tbl
                      USING HINT = 'run SELECT dp.sync_citus_labels() once this transaction has committed, before shards move to a new node';
            END;
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dp.sync_citus_labels(bool) IS 'pg_dp: sets the pg_dp label of every labelled Citus table on every worker again; strict => false warns instead of failing when a worker cannot take it. pg_dp calls it after create_distributed_table, citus_add_node, shard moves and the like; running it again changes nothing (dp_admin)';
REVOKE EXECUTE ON FUNCTION dp.sync_citus_labels(bool) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.sync_citus_labels(bool) TO dp_admin;

CREATE FUNCTION dp.relabel_table(tbl regclass, word text, present bool) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    words text[];
    label text;
    distributed bool := false;
BEGIN
    SELECT coalesce(array_agg(w ORDER BY w), '{}') INTO words
      FROM (SELECT DISTINCT trim(w) AS w
              FROM pg_catalog.pg_seclabel l, unnest(string_to_array(l.label, ',')) w
             WHERE l.objoid = tbl AND l.classoid = 'pg_catalog.pg_class'::regclass AND l.objsubid = 0
               AND l.provider = 'pg_dp' AND trim(w) <> relabel_table.word AND trim(w) <> '') x;
    IF present THEN
        words := words || word;
    END IF;
    label := nullif(array_to_string(words, ', '), '');
    -- a Citus table's label also goes to the workers, whose shards of it are protected with it
    -- (docs/distributed.md); Citus itself propagates only the labels of roles
    IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)' INTO distributed USING tbl;
        IF distributed THEN
            PERFORM pg_catalog.set_config('citus.enable_unsupported_feature_messages', 'off', true);
        END IF;
    END IF;
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON %s %s IS %L',
                              CASE (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = tbl)
                                   WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'v' THEN 'VIEW' ELSE 'TABLE' END,
                              tbl, label);
    IF distributed THEN
        PERFORM dp.send_label_to_workers(tbl, label);
    END IF;
END
$$;
COMMENT ON FUNCTION dp.relabel_table(regclass, text, bool) IS 'pg_dp internal: adds or removes one word of a table''s pg_dp label (protected, no_release_cache)';
REVOKE EXECUTE ON FUNCTION dp.relabel_table(regclass, text, bool) FROM PUBLIC;

CREATE FUNCTION dp.protect_table(tbl regclass, privacy_unit name DEFAULT NULL, max_groups_contributed int DEFAULT 1,
                                 max_count_per_unit int DEFAULT 1) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    old record;
BEGIN
    PERFORM dp.refuse_nulls('dp.protect_table', ARRAY['tbl', 'max_groups_contributed', 'max_count_per_unit'],
                            ARRAY[tbl IS NULL, max_groups_contributed IS NULL, max_count_per_unit IS NULL]);
    PERFORM dp.relabel_table(tbl, 'protected', true);
    IF privacy_unit IS NULL THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = tbl AND a.attname = privacy_unit AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'column "%" of % does not exist', privacy_unit, tbl USING ERRCODE = '42703';
    END IF;
    -- the previous unit column, if another, loses its label first (a table has one unit)
    FOR old IN SELECT a.attname FROM pg_catalog.pg_seclabel l
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = l.objoid AND a.attnum = l.objsubid
                WHERE l.objoid = tbl AND l.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND l.provider = 'pg_dp'
                  AND l.objsubid > 0 AND l.label LIKE '{"privacy_unit"%' AND a.attname <> privacy_unit LOOP
        EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON COLUMN %s.%I IS NULL', tbl, old.attname);
    END LOOP;
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON COLUMN %s.%I IS %L', tbl, privacy_unit,
        pg_catalog.json_build_object('privacy_unit', pg_catalog.json_build_object(
            'max_groups_contributed', max_groups_contributed, 'max_count_per_unit', max_count_per_unit))::text);
END
$$;
COMMENT ON FUNCTION dp.protect_table(regclass, name, int, int) IS 'pg_dp: protects a table (and its partitions and inheritance children): from now on only admitted DP queries read it, except superusers, its owner and trusted roles. privacy_unit names the column that identifies a person (or a foreign key to a protected table that has one): DP queries then bound each person''s contribution, to at most max_groups_contributed groups and max_count_per_unit counted rows per group. Without it one row is one person (dp_admin)';

CREATE FUNCTION dp.set_domain(tbl regclass, col name, vals anyarray) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_domain', ARRAY['tbl', 'col', 'vals'], ARRAY[tbl IS NULL, col IS NULL, vals IS NULL]);
    IF coalesce(pg_catalog.cardinality(vals), 0) = 0 THEN
        RAISE EXCEPTION 'dp.set_domain: vals must hold at least one value (dp.drop_domain removes a domain)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.array_position(vals, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'dp.set_domain: vals must not hold NULL (NULL is always a group of its own)'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON COLUMN %s.%I IS %L', tbl, col,
        pg_catalog.json_build_object('domain', (SELECT pg_catalog.json_agg(v::text) FROM pg_catalog.unnest(vals) v))::text);
END
$$;
COMMENT ON FUNCTION dp.set_domain(regclass, name, anyarray) IS 'pg_dp: declares the public values of a column of a protected table: a DP query grouped by the column shows one row per value, empty ones included (with noise), never another value, and spends no delta on the choice of groups (dp_admin)';

CREATE FUNCTION dp.set_domain(tbl regclass, col name, keys regclass, key_column name) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_domain', ARRAY['tbl', 'col', 'keys', 'key_column'],
                            ARRAY[tbl IS NULL, col IS NULL, keys IS NULL, key_column IS NULL]);
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON COLUMN %s.%I IS %L', tbl, col,
        pg_catalog.json_build_object('domain', pg_catalog.json_build_object('table', keys::text, 'column', key_column))::text);
END
$$;
COMMENT ON FUNCTION dp.set_domain(regclass, name, regclass, name) IS 'pg_dp: declares that the public values of a column of a protected table are the distinct values of key_column of the public table keys (read when a query runs, with the caller''s privileges) (dp_admin)';

-- Removes a column's pg_dp declaration of one kind ("domain", "bounds"), leaving the others.
CREATE FUNCTION dp.drop_column_declaration(tbl regclass, col name, kind text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_seclabel l JOIN pg_catalog.pg_attribute a ON a.attrelid = l.objoid AND a.attnum = l.objsubid
                WHERE l.objoid = tbl AND l.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND l.provider = 'pg_dp'
                  AND a.attname = col AND l.label LIKE '{"' || kind || '"%') THEN
        EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON COLUMN %s.%I IS NULL', tbl, col);
    END IF;
END
$$;
COMMENT ON FUNCTION dp.drop_column_declaration(regclass, name, text) IS 'pg_dp internal: removes the pg_dp declaration of one kind from a column (dp.drop_domain, dp.drop_bounds)';
REVOKE EXECUTE ON FUNCTION dp.drop_column_declaration(regclass, name, text) FROM PUBLIC;

CREATE FUNCTION dp.drop_domain(tbl regclass, col name) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT dp.refuse_nulls('dp.drop_domain', ARRAY['tbl', 'col'], ARRAY[tbl IS NULL, col IS NULL]);
    SELECT dp.drop_column_declaration(tbl, col, 'domain');
$$;
COMMENT ON FUNCTION dp.drop_domain(regclass, name) IS 'pg_dp: removes the public domain of a column; DP queries grouped by it then choose their groups by DP partition selection (dp_admin)';

CREATE FUNCTION dp.unprotect_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.unprotect_table', ARRAY['tbl'], ARRAY[tbl IS NULL]);
    PERFORM dp.relabel_table(tbl, 'protected', false);
END
$$;
COMMENT ON FUNCTION dp.unprotect_table(regclass) IS 'pg_dp: removes the protection of a table; roles with SELECT can then read it directly (dp_admin)';

CREATE FUNCTION dp.trust_role(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.trust_role', ARRAY['role'], ARRAY[role IS NULL]);
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON ROLE %s IS %L', role, 'trusted');
END
$$;
COMMENT ON FUNCTION dp.trust_role(regrole) IS 'pg_dp: exempts a role (and its members) from table protection in every database: it reads protected tables directly, with its own grants (dp_admin)';

CREATE FUNCTION dp.distrust_role(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.distrust_role', ARRAY['role'], ARRAY[role IS NULL]);
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON ROLE %s IS NULL', role);
END
$$;
COMMENT ON FUNCTION dp.distrust_role(regrole) IS 'pg_dp: ends the exemption of a role from table protection (dp_admin)';

CREATE VIEW dp.protected_tables AS
SELECT l.objoid::pg_catalog.regclass AS table_name, c.relowner::pg_catalog.regrole AS owner,
       u.attname AS privacy_unit,
       (u.label::pg_catalog.jsonb -> 'privacy_unit' ->> 'max_groups_contributed')::int AS max_groups_contributed,
       (u.label::pg_catalog.jsonb -> 'privacy_unit' ->> 'max_count_per_unit')::int AS max_count_per_unit,
       (SELECT pg_catalog.substr(w, 14)::bigint FROM pg_catalog.unnest(pg_catalog.string_to_array(pg_catalog.replace(l.label, ' ', ''), ',')) w
         WHERE w LIKE 'public\_count=%') AS public_count
  FROM pg_catalog.pg_seclabel l
  JOIN pg_catalog.pg_class c ON c.oid = l.objoid
  LEFT JOIN LATERAL (
       SELECT a.attname, ul.label FROM pg_catalog.pg_seclabel ul
         JOIN pg_catalog.pg_attribute a ON a.attrelid = ul.objoid AND a.attnum = ul.objsubid
        WHERE ul.objoid = l.objoid AND ul.classoid = l.classoid AND ul.provider = 'pg_dp' AND ul.objsubid > 0
          AND ul.label LIKE '{"privacy_unit"%') u ON true
 WHERE l.provider = 'pg_dp' AND l.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass
   AND l.objsubid = 0 AND 'protected' = ANY (pg_catalog.string_to_array(pg_catalog.replace(l.label, ' ', ''), ','));
COMMENT ON VIEW dp.protected_tables IS 'pg_dp: the tables of this database protected by pg_dp, their owners, privacy units (NULL: one row is one person) and public row counts (dp.set_public_count)';

CREATE VIEW dp.domains AS
SELECT l.objoid::pg_catalog.regclass AS table_name, a.attname AS column_name,
       CASE WHEN pg_catalog.jsonb_typeof(l.label::pg_catalog.jsonb -> 'domain') = 'array'
            THEN ARRAY(SELECT pg_catalog.jsonb_array_elements_text(l.label::pg_catalog.jsonb -> 'domain')) END AS domain_values,
       l.label::pg_catalog.jsonb -> 'domain' ->> 'table' AS domain_table,
       l.label::pg_catalog.jsonb -> 'domain' ->> 'column' AS domain_column
  FROM pg_catalog.pg_seclabel l
  JOIN pg_catalog.pg_attribute a ON a.attrelid = l.objoid AND a.attnum = l.objsubid
 WHERE l.provider = 'pg_dp' AND l.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass
   AND l.objsubid > 0 AND l.label LIKE '{"domain"%';
COMMENT ON VIEW dp.domains IS 'pg_dp: the public domains declared for columns of protected tables (a list of values, or a column of a public table)';

CREATE VIEW dp.trusted_roles AS
SELECT l.objoid::pg_catalog.regrole AS role_name
  FROM pg_catalog.pg_shseclabel l
 WHERE l.provider = 'pg_dp' AND l.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND l.label = 'trusted';
COMMENT ON VIEW dp.trusted_roles IS 'pg_dp: the roles exempt from table protection (in every database)';

GRANT SELECT ON dp.protected_tables, dp.trusted_roles, dp.domains TO PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.protect_table(regclass, name, int, int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.set_domain(regclass, name, anyarray) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.set_domain(regclass, name, regclass, name) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.drop_domain(regclass, name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.set_domain(regclass, name, anyarray) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.set_domain(regclass, name, regclass, name) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.drop_domain(regclass, name) TO dp_admin;
REVOKE EXECUTE ON FUNCTION dp.unprotect_table(regclass) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.trust_role(regrole) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.distrust_role(regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.protect_table(regclass, name, int, int) TO dp_admin;
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

-- The position of the write-ahead log moves when a read prunes a heap page or sets hint bits (with
-- wal_log_hints or checksums), so it tells which pages an index scan below a DP aggregate visited:
-- the functions that return it are executable by superusers and members of pg_read_all_stats only.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'pg_catalog'::regnamespace
           AND p.proname IN ('pg_current_wal_lsn', 'pg_current_wal_insert_lsn', 'pg_current_wal_flush_lsn',
                             'pg_last_wal_receive_lsn', 'pg_last_wal_replay_lsn', 'pg_logical_emit_message',
                             'pg_control_checkpoint', 'pg_control_recovery')
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pg_read_all_stats', f);
    END LOOP;
END
$$;

-- pg_dp 0.1.0 -> 0.2.0 (ALTER EXTENSION pg_dp UPDATE TO '0.2.0'). Keeps every budget, receipt,
-- query text, label and archive; tests/client/test_upgrade.py checks that the result equals a fresh
-- install of 0.2.0.
\echo Use "ALTER EXTENSION pg_dp UPDATE TO '0.2.0'" to load this file. \quit

-- receipts of reused releases (the release cache) and forfeits of nothing are recorded at epsilon 0
ALTER TABLE dp.release_log DROP CONSTRAINT release_log_epsilon_check;
ALTER TABLE dp.release_log ADD CONSTRAINT release_log_epsilon_check CHECK (epsilon > 0 OR (epsilon = 0 AND (details ? 'reused' OR details ? 'forfeit')));

-- a table's pg_dp label is a list of words (protected, no_release_cache)
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

CREATE OR REPLACE FUNCTION dp.protect_table(tbl regclass, privacy_unit name DEFAULT NULL, max_groups_contributed int DEFAULT 1,
                                 max_count_per_unit int DEFAULT 1) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    old record;
BEGIN
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

CREATE OR REPLACE FUNCTION dp.unprotect_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.relabel_table(tbl, 'protected', false);
END
$$;

CREATE OR REPLACE VIEW dp.protected_tables AS
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

-- the release cache
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

-- role identities (a shared security label of provider pg_dp_role) instead of OIDs
CREATE OR REPLACE VIEW dp.role_identities AS
SELECT l.objoid::pg_catalog.regrole AS role, l.label::uuid AS role_uid
  FROM pg_catalog.pg_shseclabel l
 WHERE l.provider = 'pg_dp_role' AND l.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass;

COMMENT ON VIEW dp.role_identities IS 'pg_dp: the pg_dp identity (role_uid) of each role that has one, its security label of provider pg_dp_role, shared by every database; budgets and receipts belong to the identity, not to the OID';

GRANT SELECT ON dp.role_identities TO PUBLIC;

CREATE OR REPLACE FUNCTION dp.role_uid(role regrole) RETURNS uuid
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT i.role_uid FROM dp.role_identities i WHERE i.role = role_uid.role;
$$;

COMMENT ON FUNCTION dp.role_uid(regrole) IS 'pg_dp: the pg_dp identity of a role (NULL: it has none, and so no budget)';

CREATE OR REPLACE FUNCTION dp.ensure_role_uid(role regrole) RETURNS uuid
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u uuid := dp.role_uid(role);
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must be an existing role, got NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF u IS NULL THEN
        u := pg_catalog.gen_random_uuid();
        EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp_role ON ROLE %s IS %L', role, u);
    END IF;
    RETURN u;
END
$$;

COMMENT ON FUNCTION dp.ensure_role_uid(regrole) IS 'pg_dp internal: the pg_dp identity of a role, given a new one (a random uuid) if it has none';

REVOKE EXECUTE ON FUNCTION dp.ensure_role_uid(regrole) FROM PUBLIC;

DROP FUNCTION dp.grant_budget(regrole, float8, float8);
DROP FUNCTION dp.set_budget(regrole, float8, float8, float8);
DROP FUNCTION dp.set_budget_period(regrole, interval);
DROP FUNCTION dp.pin_privacy_level(regrole, text);
DROP VIEW dp.my_ledger;
DROP VIEW dp.ledger;
DROP VIEW dp.my_budget;
DROP VIEW dp.budgets;

-- every role with a budget gets its identity; a budget whose role is gone gets one no role carries
ALTER TABLE dp.role_budget ADD COLUMN role_uid uuid, ADD COLUMN role_name name;
UPDATE dp.role_budget b
   SET role_uid = CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = b.role)
                       THEN dp.ensure_role_uid(b.role::pg_catalog.regrole) ELSE pg_catalog.gen_random_uuid() END,
       role_name = coalesce((SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = b.role), b.role::text::name);
ALTER TABLE dp.role_budget DROP CONSTRAINT role_budget_pkey;
ALTER TABLE dp.role_budget DROP COLUMN role;
ALTER TABLE dp.role_budget ADD CONSTRAINT role_budget_pkey PRIMARY KEY (role_uid);
ALTER TABLE dp.role_budget ALTER COLUMN role_name SET NOT NULL;

-- The budget's amounts are domains rather than CHECK constraints of the table: a domain's checks are
-- prepared once per session, a table's CHECK constraints are read and planned again by every statement
-- that writes a row (the ledger worker's update of the budget rows, once per batch).
CREATE DOMAIN dp.budget_amount AS numeric CHECK (VALUE >= 0);
COMMENT ON DOMAIN dp.budget_amount IS 'pg_dp: an amount of epsilon or delta granted or spent by a role (exact numeric, at least 0)';
CREATE DOMAIN dp.delta_grant AS numeric CHECK (VALUE >= 0 AND VALUE < 1);
COMMENT ON DOMAIN dp.delta_grant IS 'pg_dp: the delta granted to a role (exact numeric, in [0, 1))';
CREATE DOMAIN dp.epsilon_cap AS numeric CHECK (VALUE > 0);
COMMENT ON DOMAIN dp.epsilon_cap IS 'pg_dp: a role''s largest epsilon per query (exact numeric, above 0)';
CREATE DOMAIN dp.budget_period AS interval CHECK (VALUE >= interval '1 hour');
COMMENT ON DOMAIN dp.budget_period IS 'pg_dp: the period after which a role''s budget is renewed (at least an hour)';

ALTER TABLE dp.role_budget
    DROP CONSTRAINT role_budget_epsilon_granted_check,
    DROP CONSTRAINT role_budget_epsilon_spent_check,
    DROP CONSTRAINT role_budget_delta_granted_check,
    DROP CONSTRAINT role_budget_delta_spent_check,
    DROP CONSTRAINT role_budget_max_epsilon_per_query_check,
    DROP CONSTRAINT role_budget_period_check,
    ALTER COLUMN epsilon_granted TYPE dp.budget_amount,
    ALTER COLUMN epsilon_spent TYPE dp.budget_amount,
    ALTER COLUMN delta_granted TYPE dp.delta_grant,
    ALTER COLUMN delta_spent TYPE dp.budget_amount,
    ALTER COLUMN max_epsilon_per_query TYPE dp.epsilon_cap,
    ALTER COLUMN period TYPE dp.budget_period;

ALTER TABLE dp.release_log ADD COLUMN role_uid uuid;
UPDATE dp.release_log l SET role_uid = dp.role_uid(l.role::pg_catalog.regrole)
 WHERE EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = l.role);
DROP INDEX dp.release_log_role_charged_at_idx;
CREATE INDEX ON dp.release_log (role_uid, charged_at);

ALTER TABLE dp.dropped_role_budget ADD COLUMN role_uid uuid;

COMMENT ON TABLE dp.role_budget IS 'pg_dp: privacy budget of each role in this database (exact numeric), by the role''s pg_dp identity (role_uid); read it through dp.budgets';

CREATE VIEW dp.budgets AS
SELECT i.role,
       b.epsilon_granted,
       s.epsilon_spent,
       b.epsilon_granted - s.epsilon_spent               AS epsilon_remaining,
       b.delta_granted,
       s.delta_spent,
       b.delta_granted - s.delta_spent                   AS delta_remaining,
       b.max_epsilon_per_query,
       b.updated_at,
       b.privacy_level                                   AS pinned_privacy_level,
       b.period,
       CASE WHEN b.period IS NOT NULL THEN s.period_start + b.period END AS period_ends,
       b.lifetime_epsilon_spent + b.epsilon_spent        AS lifetime_epsilon_spent,
       b.lifetime_delta_spent + b.delta_spent            AS lifetime_delta_spent,
       b.role_uid,
       coalesce((SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = i.role), b.role_name) AS role_name
  FROM dp.role_budget b
       LEFT JOIN dp.role_identities i ON i.role_uid = b.role_uid,
       -- a period that has ended is shown renewed (the debit renews it at the next charge)
       LATERAL (SELECT CASE WHEN b.period IS NOT NULL AND pg_catalog.now() >= b.period_start + b.period THEN 0 ELSE b.epsilon_spent END AS epsilon_spent,
                       CASE WHEN b.period IS NOT NULL AND pg_catalog.now() >= b.period_start + b.period THEN 0 ELSE b.delta_spent END AS delta_spent,
                       dp.current_period_start(b.period_start, b.period) AS period_start) s;

COMMENT ON VIEW dp.budgets IS 'pg_dp: granted, spent and remaining epsilon and delta of every role in this database (in its current period, if it has one), its per-query cap, pinned privacy level, budget period, lifetime spending and pg_dp identity; role is NULL when no role carries the identity (the role was dropped, or restored without its label: dp.adopt_budget), role_name is then its last known name (superusers and dp_admin)';

CREATE VIEW dp.ledger AS
SELECT l.id, l.charged_at, i.role, l.role_name, l.database_user, l.query_id,
       coalesce(l.query_text, (SELECT q.query_text FROM dp.query_text q WHERE q.query_id = l.query_id)) AS query_text,
       l.aggregate, l.mechanism, l.sensitivity, l.noise_scale, l.epsilon, l.delta, l.details,
       l.details->'execution'->>'id' AS execution_id,
       l.details->'execution'->>'application_name' AS application_name,
       l.details->'execution'->>'client' AS client,
       l.details->'parameters' AS parameters,
       l.role_uid
  FROM dp.release_log l
       LEFT JOIN dp.role_identities i ON i.role_uid = l.role_uid;

COMMENT ON VIEW dp.ledger IS 'pg_dp: every paid release, with its role, query (query_id: a fingerprint of the query, as pg_stat_statements computes it), mechanism, sensitivity, noise scale (for smooth sensitivity: its largest possible value), epsilon, delta, mechanism details, and for audits the execution it belongs to (one id per execution), the application name, the client address and the parameters it was paid at; role is the role that carries the receipt''s pg_dp identity (role_uid) now, role_name its name at the charge (superusers and dp_admin)';

CREATE VIEW dp.my_budget WITH (security_barrier) AS
SELECT role, epsilon_granted, epsilon_spent, epsilon_remaining, delta_granted, delta_spent, delta_remaining,
       max_epsilon_per_query, pinned_privacy_level, period, period_ends, lifetime_epsilon_spent, lifetime_delta_spent
  FROM dp.budgets
 WHERE role_uid = (SELECT dp.role_uid(r.oid) FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER);

COMMENT ON VIEW dp.my_budget IS 'pg_dp: the current role''s privacy budget';

CREATE VIEW dp.my_ledger WITH (security_barrier) AS
SELECT id, charged_at, query_id, query_text, aggregate, mechanism, sensitivity, noise_scale, epsilon, delta, details
  FROM dp.ledger
 WHERE role_uid = (SELECT dp.role_uid(r.oid) FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER);

COMMENT ON VIEW dp.my_ledger IS 'pg_dp: the current role''s receipts (those of its pg_dp identity)';

GRANT SELECT ON dp.budgets, dp.ledger TO dp_admin;

GRANT SELECT ON dp.my_budget, dp.my_ledger TO PUBLIC;

CREATE FUNCTION dp.grant_budget(role regrole, epsilon float8, delta float8 DEFAULT 0) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u uuid;
BEGIN
    PERFORM dp.check_epsilon_delta(epsilon, delta);
    u := dp.ensure_role_uid(role);
    INSERT INTO dp.role_budget AS b (role_uid, role_name, epsilon_granted, delta_granted)
    VALUES (u, (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = role), epsilon::text::numeric, delta::text::numeric)
    ON CONFLICT ON CONSTRAINT role_budget_pkey DO UPDATE
       SET epsilon_granted = b.epsilon_granted + EXCLUDED.epsilon_granted,
           delta_granted   = b.delta_granted + EXCLUDED.delta_granted,
           role_name       = EXCLUDED.role_name,
           updated_at      = pg_catalog.now();
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = u;
END
$$;

COMMENT ON FUNCTION dp.grant_budget(regrole, float8, float8) IS 'pg_dp: adds epsilon and delta to a role''s privacy budget in this database, giving the role a pg_dp identity first if it has none (dp_admin)';

CREATE FUNCTION dp.set_budget(role regrole, epsilon float8, delta float8 DEFAULT 0,
                              max_epsilon_per_query float8 DEFAULT NULL) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u uuid;
BEGIN
    PERFORM dp.check_epsilon_delta(epsilon, delta);
    IF max_epsilon_per_query IS NOT NULL
       AND NOT (max_epsilon_per_query > 0 AND max_epsilon_per_query <= 1e6) THEN
        RAISE EXCEPTION 'max_epsilon_per_query must be NULL or a number greater than 0 and at most 1e6, got %',
            max_epsilon_per_query USING ERRCODE = 'invalid_parameter_value';
    END IF;
    u := dp.ensure_role_uid(role);
    INSERT INTO dp.role_budget AS b (role_uid, role_name, epsilon_granted, delta_granted, max_epsilon_per_query)
    VALUES (u, (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = role), epsilon::text::numeric, delta::text::numeric, max_epsilon_per_query::text::numeric)
    ON CONFLICT ON CONSTRAINT role_budget_pkey DO UPDATE
       SET epsilon_granted       = EXCLUDED.epsilon_granted,
           delta_granted         = EXCLUDED.delta_granted,
           max_epsilon_per_query = EXCLUDED.max_epsilon_per_query,
           role_name             = EXCLUDED.role_name,
           updated_at            = pg_catalog.now();
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = u;
END
$$;

COMMENT ON FUNCTION dp.set_budget(regrole, float8, float8, float8) IS 'pg_dp: sets a role''s granted epsilon and delta (spending so far is kept) and its per-query epsilon cap (dp_admin)';

CREATE OR REPLACE FUNCTION dp.revoke_budget(role regrole) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    -- nothing remains, and what was spent stays: a later grant adds to it, never erases it
    UPDATE dp.role_budget b
       SET epsilon_granted = b.epsilon_spent, delta_granted = b.delta_spent, updated_at = pg_catalog.now()
     WHERE b.role_uid = dp.role_uid(revoke_budget.role);
$$;

CREATE FUNCTION dp.set_budget_period(role regrole, period interval) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF period IS NOT NULL AND NOT (period >= interval '1 hour') THEN
        RAISE EXCEPTION 'period must be NULL or at least 1 hour, got %', period USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM dp.role_budget b WHERE b.role_uid = dp.role_uid(set_budget_period.role)) THEN
        RAISE EXCEPTION 'role % has no privacy budget', role USING ERRCODE = 'invalid_parameter_value',
            HINT = 'grant one first: SELECT dp.grant_budget(role, epsilon)';
    END IF;
    -- a new period starts now; what was spent so far moves to the lifetime totals
    UPDATE dp.role_budget b
       SET period = set_budget_period.period,
           period_start = CASE WHEN set_budget_period.period IS NULL THEN NULL ELSE pg_catalog.now() END,
           lifetime_epsilon_spent = b.lifetime_epsilon_spent + b.epsilon_spent,
           lifetime_delta_spent = b.lifetime_delta_spent + b.delta_spent,
           epsilon_spent = 0, delta_spent = 0, updated_at = pg_catalog.now()
     WHERE b.role_uid = dp.role_uid(set_budget_period.role);
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = dp.role_uid(set_budget_period.role);
END
$$;

COMMENT ON FUNCTION dp.set_budget_period(regrole, interval) IS 'pg_dp: renews a role''s granted epsilon and delta every period (at least 1 hour; NULL: no period), starting now; spending moves to lifetime totals, never erased (dp_admin)';

REVOKE EXECUTE ON FUNCTION dp.set_budget_period(regrole, interval) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION dp.set_budget_period(regrole, interval) TO dp_admin;

CREATE OR REPLACE FUNCTION dp.adopt_budget(role regrole, role_uid uuid) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    own    uuid := dp.role_uid(role);
    holder regrole := (SELECT i.role FROM dp.role_identities i WHERE i.role_uid = adopt_budget.role_uid);
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must be an existing role, got NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF adopt_budget.role_uid IS NULL THEN
        RAISE EXCEPTION 'role_uid must be the pg_dp identity of a budget (a uuid, dp.budgets.role_uid), got NULL'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF own IS DISTINCT FROM adopt_budget.role_uid THEN
        IF own IS NOT NULL THEN
            RAISE EXCEPTION 'role % already has pg_dp identity %: it cannot adopt another', role, own
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'a superuser can remove its identity first (SECURITY LABEL FOR pg_dp_role ON ROLE ... IS NULL); the budgets of that identity, in every database, then belong to no role';
        END IF;
        IF holder IS NOT NULL THEN
            RAISE EXCEPTION 'role_uid % is the pg_dp identity of role %: it cannot be adopted by role %', adopt_budget.role_uid, holder, role
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT EXISTS (SELECT FROM dp.role_budget b WHERE b.role_uid = adopt_budget.role_uid)
           AND NOT EXISTS (SELECT FROM dp.release_log l WHERE l.role_uid = adopt_budget.role_uid) THEN
            RAISE EXCEPTION 'role_uid % has no budget and no receipt in database %', adopt_budget.role_uid, pg_catalog.current_database()
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'dp.budgets lists the role_uid of every budget of this database, with role NULL when no role carries it';
        END IF;
        EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp_role ON ROLE %s IS %L', role, adopt_budget.role_uid);
    END IF;
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = adopt_budget.role_uid;
END
$$;

COMMENT ON FUNCTION dp.adopt_budget(regrole, uuid) IS 'pg_dp: gives a role without a pg_dp identity the identity role_uid (dp.budgets.role_uid) of a budget no role carries, with its budgets and receipts in every database (a role restored without its security label); refused when the role has another identity or another role has this one (dp_admin)';

REVOKE EXECUTE ON FUNCTION dp.adopt_budget(regrole, uuid) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION dp.adopt_budget(regrole, uuid) TO dp_admin;

CREATE OR REPLACE FUNCTION dp.export_ledger(since timestamptz DEFAULT '-infinity', until timestamptz DEFAULT 'infinity') RETURNS SETOF jsonb
LANGUAGE sql STABLE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.to_jsonb(l) FROM dp.ledger l WHERE l.charged_at >= since AND l.charged_at < until ORDER BY l.id;
$$;

COMMENT ON FUNCTION dp.export_ledger(timestamptz, timestamptz) IS 'pg_dp: the receipts charged in [since, until), one JSON object each, for audits (reads dp.ledger with the caller''s rights: superusers and dp_admin); for CSV, COPY (SELECT * FROM dp.ledger) TO STDOUT WITH CSV HEADER';

COMMENT ON TABLE dp.dropped_role_budget IS 'pg_dp: the budgets of dropped roles, archived by DROP ROLE in this database, with the role''s OID, name and pg_dp identity then (superusers and dp_admin)';

CREATE OR REPLACE FUNCTION dp.archive_role_budget(role oid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH gone AS (DELETE FROM dp.role_budget b WHERE b.role_uid = dp.role_uid(archive_role_budget.role) RETURNING b.*)
    INSERT INTO dp.dropped_role_budget (role, role_name, epsilon_granted, epsilon_spent, delta_granted, delta_spent,
                                        lifetime_epsilon_spent, lifetime_delta_spent, role_uid)
    SELECT archive_role_budget.role, coalesce((SELECT rolname FROM pg_catalog.pg_roles r WHERE r.oid = archive_role_budget.role), g.role_name),
           g.epsilon_granted, g.epsilon_spent, g.delta_granted, g.delta_spent,
           g.lifetime_epsilon_spent + g.epsilon_spent, g.lifetime_delta_spent + g.delta_spent, g.role_uid
      FROM gone g;
$$;

CREATE FUNCTION dp.pin_privacy_level(role regrole, level text) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u uuid;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must be an existing role, got NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF level IS NOT NULL THEN
        PERFORM dp.privacy_level_epsilon(level);  -- an unknown level: an error that lists the valid ones
    END IF;
    u := dp.ensure_role_uid(role);
    INSERT INTO dp.role_budget AS b (role_uid, role_name, privacy_level)
    VALUES (u, (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = role), level)
    ON CONFLICT ON CONSTRAINT role_budget_pkey DO UPDATE
       SET privacy_level = EXCLUDED.privacy_level,
           role_name     = EXCLUDED.role_name,
           updated_at    = pg_catalog.now();
    -- the role's sessions in this database start at its level (from their next connection)
    IF level IS NULL THEN
        EXECUTE pg_catalog.format('ALTER ROLE %s IN DATABASE %I RESET dp.privacy_level', role, pg_catalog.current_database());
    ELSE
        EXECUTE pg_catalog.format('ALTER ROLE %s IN DATABASE %I SET dp.privacy_level = %L', role, pg_catalog.current_database(), level);
    END IF;
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = u;
END
$$;

COMMENT ON FUNCTION dp.pin_privacy_level(regrole, text) IS 'pg_dp: pins a named privacy level to a role in this database: each of its queries may spend at most the level''s epsilon (with any per-query cap), and its sessions start at that level; NULL unpins (dp_admin)';

REVOKE EXECUTE ON FUNCTION dp.pin_privacy_level(regrole, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION dp.pin_privacy_level(regrole, text) TO dp_admin;

-- A role's budget row, locked for the debit, in its current period: when its budget period has ended,
-- what the last period spent moves to the lifetime totals first. No row: the role has no budget.
CREATE FUNCTION dp.locked_budget(uid uuid) RETURNS SETOF dp.role_budget
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b dp.role_budget;
BEGIN
    SELECT * INTO b FROM dp.role_budget r WHERE r.role_uid = uid FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF b.period IS NOT NULL AND pg_catalog.now() >= b.period_start + b.period THEN
        UPDATE dp.role_budget r
           SET lifetime_epsilon_spent = r.lifetime_epsilon_spent + r.epsilon_spent,
               lifetime_delta_spent   = r.lifetime_delta_spent + r.delta_spent,
               epsilon_spent = 0, delta_spent = 0,
               period_start = dp.current_period_start(r.period_start, r.period)
         WHERE r.role_uid = uid
        RETURNING * INTO b;
    END IF;
    RETURN NEXT b;
END
$$;
COMMENT ON FUNCTION dp.locked_budget(uuid) IS 'pg_dp internal: a role''s budget row, locked, renewed first if its budget period has ended; run only by the ledger worker';
REVOKE EXECUTE ON FUNCTION dp.locked_budget(uuid) FROM PUBLIC;

-- The debit is run by the ledger worker (src/budget/debit.rs): each batch of waiting charges in one
-- transaction, each role's budget row locked once and its requests decided in order, one update of the
-- rows that pay and one insert of every receipt. 0.1.0's function is no longer called.
DROP FUNCTION dp.debit(oid, name, bool, bigint, text, text[], text[], float8[], float8[], numeric[], numeric[], jsonb[]);

REVOKE EXECUTE ON FUNCTION dp.grant_budget(regrole, float8, float8) FROM PUBLIC;

REVOKE EXECUTE ON FUNCTION dp.set_budget(regrole, float8, float8, float8) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION dp.grant_budget(regrole, float8, float8) TO dp_admin;

GRANT EXECUTE ON FUNCTION dp.set_budget(regrole, float8, float8, float8) TO dp_admin;

-- Reuses of cached releases: one row per role and released execution, with a counter, never the
-- query text again (a reuse costs nothing, so it writes no receipt to dp.release_log).
CREATE TABLE dp.release_reuse (
    role            oid NOT NULL,
    role_name       name NOT NULL,
    role_uid        uuid,
    -- the execution whose releases were reused (dp.ledger.execution_id of its receipts)
    execution       text NOT NULL,
    reuses          bigint NOT NULL DEFAULT 1,
    first_reused_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    last_reused_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    PRIMARY KEY (role, execution)
);
COMMENT ON TABLE dp.release_reuse IS 'pg_dp: how often each role reused the cached releases of a paid execution (one row per role and execution); read it through dp.reuses';
SELECT pg_catalog.pg_extension_config_dump('dp.release_reuse', '');

CREATE VIEW dp.reuses AS
SELECT r.role::pg_catalog.regrole AS role, r.role_name, r.role_uid, r.execution, r.reuses, r.first_reused_at, r.last_reused_at
  FROM dp.release_reuse r;
COMMENT ON VIEW dp.reuses IS 'pg_dp: reuses of cached releases, per role and paid execution (the execution_id of its receipts in dp.ledger), with their count and first and last time; a reuse is free and writes no receipt (superusers and dp_admin)';
GRANT SELECT ON dp.reuses TO dp_admin;

CREATE VIEW dp.my_reuses WITH (security_barrier) AS
SELECT r.execution, r.reuses, r.first_reused_at, r.last_reused_at
  FROM dp.release_reuse r
 WHERE r.role = (SELECT o.oid FROM pg_catalog.pg_roles o WHERE o.rolname = CURRENT_USER);
COMMENT ON VIEW dp.my_reuses IS 'pg_dp: the current role''s reuses of cached releases, per paid execution';
GRANT SELECT ON dp.my_reuses TO PUBLIC;

-- Whether a role could have bought the cached releases it asks for (epsilons and deltas of their
-- receipts): a budget (unless unlimited) with that much epsilon and delta remaining, and their total
-- within its per-query cap and pinned level. NULL when it could, else the reason, as the debit gives
-- it. Called only by the ledger worker.
CREATE FUNCTION dp.reuse_refusal(role oid, unlimited bool, epsilons numeric[], deltas numeric[]) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b         dp.role_budget;
    eps_total numeric := (SELECT coalesce(sum(e), 0) FROM unnest(epsilons) e);
    del_total numeric := (SELECT coalesce(sum(d), 0) FROM unnest(deltas) d);
BEGIN
    SELECT * INTO b FROM dp.role_budget r WHERE r.role_uid = dp.role_uid(reuse_refusal.role);
    IF NOT FOUND THEN
        RETURN CASE WHEN unlimited THEN NULL ELSE 'no budget' END;
    END IF;
    IF b.max_epsilon_per_query IS NOT NULL AND eps_total > b.max_epsilon_per_query THEN
        RETURN 'cap:' || b.max_epsilon_per_query::text;
    END IF;
    IF b.privacy_level IS NOT NULL AND eps_total > dp.privacy_level_epsilon(b.privacy_level)::numeric THEN
        RETURN 'level:' || b.privacy_level || ':' || dp.privacy_level_epsilon(b.privacy_level)::numeric::text;
    END IF;
    -- a budget period that has ended renews at the next debit: what remains is what it will renew to
    IF NOT (b.period IS NOT NULL AND pg_catalog.now() >= b.period_start + b.period)
       AND (eps_total > b.epsilon_granted - b.epsilon_spent OR del_total > b.delta_granted - b.delta_spent) THEN
        RETURN 'exhausted';
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dp.reuse_refusal(oid, bool, numeric[], numeric[]) IS 'pg_dp internal: NULL if a role could have bought cached releases of these epsilons and deltas (a budget with that much remaining, the per-query cap, the pinned level), else why not; run only by the ledger worker';
REVOKE EXECUTE ON FUNCTION dp.reuse_refusal(oid, bool, numeric[], numeric[]) FROM PUBLIC;

-- Counts one reuse of each execution's releases by a role. Called only by the ledger worker.
CREATE FUNCTION dp.record_reuse(role oid, executions text[]) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO dp.release_reuse AS r (role, role_name, role_uid, execution)
    SELECT record_reuse.role, coalesce((SELECT o.rolname FROM pg_catalog.pg_roles o WHERE o.oid = record_reuse.role), record_reuse.role::text),
           dp.role_uid(record_reuse.role), e
      FROM (SELECT DISTINCT unnest(executions) AS e) x
    ON CONFLICT (role, execution) DO UPDATE
       SET reuses = r.reuses + 1, last_reused_at = pg_catalog.clock_timestamp();
$$;
COMMENT ON FUNCTION dp.record_reuse(oid, text[]) IS 'pg_dp internal: counts a role''s reuse of cached releases, one row per role and execution; run only by the ledger worker';
REVOKE EXECUTE ON FUNCTION dp.record_reuse(oid, text[]) FROM PUBLIC;

-- Fail closed (src/execution/fail_closed.rs, docs/security.md): an error raised inside an admitted DP level
-- charges the role's whole remaining epsilon and delta, with one receipt that says why. Called only by
-- the ledger worker, in its own transaction; never by users.
CREATE FUNCTION dp.forfeit(role oid, database_user name, query_id bigint, query_text text, sqlstate text,
                           OUT epsilon_forfeited numeric, OUT delta_forfeited numeric)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b   dp.role_budget;
    uid uuid := dp.role_uid(forfeit.role);
BEGIN
    epsilon_forfeited := 0;
    delta_forfeited := 0;
    SELECT * INTO b FROM dp.locked_budget(uid);
    IF FOUND THEN
        epsilon_forfeited := greatest(b.epsilon_granted - b.epsilon_spent, 0);
        delta_forfeited := greatest(b.delta_granted - b.delta_spent, 0);
        UPDATE dp.role_budget r
           SET epsilon_spent = r.epsilon_spent + epsilon_forfeited, delta_spent = r.delta_spent + delta_forfeited
         WHERE r.role_uid = uid;
    ELSIF uid IS NULL AND EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = forfeit.role) THEN
        uid := dp.ensure_role_uid(forfeit.role);
    END IF;
    INSERT INTO dp.release_log (role, role_name, database_user, query_id, query_text, aggregate, mechanism,
                                sensitivity, noise_scale, epsilon, delta, details, role_uid)
    VALUES (forfeit.role, coalesce((SELECT o.rolname FROM pg_catalog.pg_roles o WHERE o.oid = forfeit.role), forfeit.role::text),
            forfeit.database_user, forfeit.query_id, forfeit.query_text, 'fail closed', 'forfeit', 0, 0,
            epsilon_forfeited, delta_forfeited,
            pg_catalog.jsonb_build_object('forfeit', pg_catalog.jsonb_build_object(
                'sqlstate', forfeit.sqlstate,
                'reason', 'an error was raised inside an admitted DP level after its charge: pg_dp admits there only what cannot fail for any stored value, so the error is treated as an attack and the role''s remaining budget is charged')),
            uid);
END
$$;
COMMENT ON FUNCTION dp.forfeit(oid, name, bigint, text, text) IS 'pg_dp internal: charges a role its whole remaining budget after an error inside an admitted DP level (fail closed), with a receipt; run only by the ledger worker in its own transaction';
REVOKE EXECUTE ON FUNCTION dp.forfeit(oid, name, bigint, text, text) FROM PUBLIC;

-- ---- sql/distributed.sql
-- pg_dp: DP levels over Citus tables (hand-written; loaded after cache.sql). docs/distributed.md and
-- docs/privacy/distributed.md. The coordinator rewrites an admitted level over a Citus table into an
-- exact query (built-in sum and count of pg_dp's grid integers, which Citus aggregates partially on the
-- workers) run by dp.distributed_rows as the bootstrap superuser, and an outer level of "merge"
-- aggregates that rebuild each group's exact state and release it with the DP aggregate's own final
-- function, charged once before any shard is read.

CREATE FUNCTION dp.exact_grid(value "any", kind int4, lower "any", upper "any", epsilon float8, squared bool) RETURNS int8
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_exact_grid';
COMMENT ON FUNCTION dp.exact_grid("any", int4, "any", "any", float8, bool) IS 'pg_dp internal: one row''s value as the DP aggregate of this kind and parameters accumulates it (clamped to [lower, upper], on its grid), or its squared distance from the grid''s centre; NULL for NULL and NaN. Run only by the exact query of a DP level over a Citus table';
REVOKE EXECUTE ON FUNCTION dp.exact_grid("any", int4, "any", "any", float8, bool) FROM PUBLIC;

CREATE FUNCTION dp.distributed_rows(exact_query text) RETURNS SETOF record
    LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'dp_distributed_rows';
COMMENT ON FUNCTION dp.distributed_rows(text) IS 'pg_dp internal: runs the exact query of a DP level over a Citus table for the DP Release node that was charged for it; refuses any other call';

CREATE FUNCTION dp.merge_trans(internal, numeric[], float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_trans';
CREATE FUNCTION dp.merge_trans(internal, numeric[], "any", "any", float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_trans';
CREATE FUNCTION dp.merge_trans(internal, numeric[], "any", "any", float8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_trans';
CREATE FUNCTION dp.merge_keep_group_trans(int8, numeric[], float8, float8) RETURNS int8
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_keep_group_trans';
COMMENT ON FUNCTION dp.merge_trans(internal, numeric[], float8) IS 'pg_dp internal: transition function of the merge aggregates (a group''s exact sums from the workers)';
COMMENT ON FUNCTION dp.merge_trans(internal, numeric[], "any", "any", float8) IS 'pg_dp internal: transition function of the merge aggregates (a group''s exact sums from the workers)';
COMMENT ON FUNCTION dp.merge_trans(internal, numeric[], "any", "any", float8, int8) IS 'pg_dp internal: transition function of the merge aggregates (a group''s exact sums from the workers)';
COMMENT ON FUNCTION dp.merge_keep_group_trans(int8, numeric[], float8, float8) IS 'pg_dp internal: transition function of dp.merge_keep_group';
REVOKE EXECUTE ON FUNCTION dp.merge_trans(internal, numeric[], float8), dp.merge_trans(internal, numeric[], "any", "any", float8),
    dp.merge_trans(internal, numeric[], "any", "any", float8, int8), dp.merge_keep_group_trans(int8, numeric[], float8, float8) FROM PUBLIC;

CREATE AGGREGATE dp.merge_count(numeric[], float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.count_final);
COMMENT ON AGGREGATE dp.merge_count(numeric[], float8) IS 'pg_dp internal: dp_count from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], int2, int2, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_int_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], int2, int2, float8) IS 'pg_dp internal: dp_sum over int2 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], int4, int4, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_int_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], int4, int4, float8) IS 'pg_dp internal: dp_sum over int4 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], int8, int8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_int8_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], int8, int8, float8) IS 'pg_dp internal: dp_sum over int8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], float8, float8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_float8_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], float8, float8, float8) IS 'pg_dp internal: dp_sum over float8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_sum(numeric[], numeric, numeric, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.sum_numeric_final);
COMMENT ON AGGREGATE dp.merge_sum(numeric[], numeric, numeric, float8) IS 'pg_dp internal: dp_sum over numeric from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_avg(numeric[], float8, float8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.avg_float8_final);
COMMENT ON AGGREGATE dp.merge_avg(numeric[], float8, float8, float8) IS 'pg_dp internal: dp_avg over float8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_avg(numeric[], float8, float8, float8, int8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.avg_float8_final);
COMMENT ON AGGREGATE dp.merge_avg(numeric[], float8, float8, float8, int8) IS 'pg_dp internal: dp_avg over float8 with a public count from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_variance(numeric[], float8, float8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.variance_float8_final);
COMMENT ON AGGREGATE dp.merge_variance(numeric[], float8, float8, float8) IS 'pg_dp internal: dp_variance over float8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_stddev(numeric[], float8, float8, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.stddev_float8_final);
COMMENT ON AGGREGATE dp.merge_stddev(numeric[], float8, float8, float8) IS 'pg_dp internal: dp_stddev over float8 from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_avg(numeric[], numeric, numeric, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.avg_numeric_final);
COMMENT ON AGGREGATE dp.merge_avg(numeric[], numeric, numeric, float8) IS 'pg_dp internal: dp_avg over numeric from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_avg(numeric[], numeric, numeric, float8, int8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.avg_numeric_final);
COMMENT ON AGGREGATE dp.merge_avg(numeric[], numeric, numeric, float8, int8) IS 'pg_dp internal: dp_avg over numeric with a public count from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_variance(numeric[], numeric, numeric, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.variance_numeric_final);
COMMENT ON AGGREGATE dp.merge_variance(numeric[], numeric, numeric, float8) IS 'pg_dp internal: dp_variance over numeric from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_stddev(numeric[], numeric, numeric, float8) (SFUNC = dp.merge_trans, STYPE = internal, FINALFUNC = dp.stddev_numeric_final);
COMMENT ON AGGREGATE dp.merge_stddev(numeric[], numeric, numeric, float8) IS 'pg_dp internal: dp_stddev over numeric from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_keep_group(numeric[], float8, float8) (SFUNC = dp.merge_keep_group_trans, STYPE = int8, FINALFUNC = dp.keep_group_final, INITCOND = '0');
COMMENT ON AGGREGATE dp.merge_keep_group(numeric[], float8, float8) IS 'pg_dp internal: dp.keep_group from a group''s exact sums computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
-- a noisy aggregate is VOLATILE (CREATE AGGREGATE records IMMUTABLE)
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp.merge_count(numeric[], float8)'::regprocedure,
               'dp.merge_sum(numeric[], int2, int2, float8)'::regprocedure,
               'dp.merge_sum(numeric[], int4, int4, float8)'::regprocedure,
               'dp.merge_sum(numeric[], int8, int8, float8)'::regprocedure,
               'dp.merge_sum(numeric[], float8, float8, float8)'::regprocedure,
               'dp.merge_sum(numeric[], numeric, numeric, float8)'::regprocedure,
               'dp.merge_avg(numeric[], float8, float8, float8)'::regprocedure,
               'dp.merge_avg(numeric[], float8, float8, float8, int8)'::regprocedure,
               'dp.merge_variance(numeric[], float8, float8, float8)'::regprocedure,
               'dp.merge_stddev(numeric[], float8, float8, float8)'::regprocedure,
               'dp.merge_avg(numeric[], numeric, numeric, float8)'::regprocedure,
               'dp.merge_avg(numeric[], numeric, numeric, float8, int8)'::regprocedure,
               'dp.merge_variance(numeric[], numeric, numeric, float8)'::regprocedure,
               'dp.merge_stddev(numeric[], numeric, numeric, float8)'::regprocedure,
               'dp.merge_keep_group(numeric[], float8, float8)'::regprocedure);

-- Quantiles: the exact query groups by the value too, one row per group and value with its count
-- (ARRAY[value, count], float8[] or int8[]); the merge aggregates push each value count times into
-- the quantile's own state and release it with the quantile's own final function.

CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any") FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any") FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any") FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any", "any", "any", "any", "any") FROM PUBLIC;
CREATE AGGREGATE dp.merge_median(float8[], float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[], float8, float8) IS 'pg_dp internal: dp_median over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(float8[], float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[], float8, float8, float8) IS 'pg_dp internal: dp_median over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(float8[], float8, float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[], float8, float8, float8, float8) IS 'pg_dp internal: dp_median over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int4, int4) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int4, int4) IS 'pg_dp internal: dp_median over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int4, int4, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int4, int4, float8) IS 'pg_dp internal: dp_median over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int4, int4, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int4, int4, float8, float8) IS 'pg_dp internal: dp_median over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int8, int8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int8, int8) IS 'pg_dp internal: dp_median over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int8, int8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int8, int8, float8) IS 'pg_dp internal: dp_median over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(int8[], int8, int8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(int8[], int8, int8, float8, float8) IS 'pg_dp internal: dp_median over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8, float8, float8) IS 'pg_dp internal: dp_percentile over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8, float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8, float8, float8, float8) IS 'pg_dp internal: dp_percentile over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8, float8, float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8, float8, float8, float8, float8) IS 'pg_dp internal: dp_percentile over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int4, int4) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int4, int4) IS 'pg_dp internal: dp_percentile over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int4, int4, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int4, int4, float8) IS 'pg_dp internal: dp_percentile over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int4, int4, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int4, int4, float8, float8) IS 'pg_dp internal: dp_percentile over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int8, int8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int8, int8) IS 'pg_dp internal: dp_percentile over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int8, int8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int8, int8, float8) IS 'pg_dp internal: dp_percentile over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(int8[], float8, int8, int8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(int8[], float8, int8, int8, float8, float8) IS 'pg_dp internal: dp_percentile over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(float8[], float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(float8[], float8, float8, float8) IS 'pg_dp internal: dp_percentile_em over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(float8[], float8, float8, float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(float8[], float8, float8, float8, float8) IS 'pg_dp internal: dp_percentile_em over float8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(int8[], float8, int4, int4) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(int8[], float8, int4, int4) IS 'pg_dp internal: dp_percentile_em over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(int8[], float8, int4, int4, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(int8[], float8, int4, int4, float8) IS 'pg_dp internal: dp_percentile_em over int4 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(int8[], float8, int8, int8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(int8[], float8, int8, int8) IS 'pg_dp internal: dp_percentile_em over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile_em(int8[], float8, int8, int8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile_em(int8[], float8, int8, int8, float8) IS 'pg_dp internal: dp_percentile_em over int8 from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp.merge_median(float8[], float8, float8)'::regprocedure,
               'dp.merge_median(float8[], float8, float8, float8)'::regprocedure,
               'dp.merge_median(float8[], float8, float8, float8, float8)'::regprocedure,
               'dp.merge_median(int8[], int4, int4)'::regprocedure,
               'dp.merge_median(int8[], int4, int4, float8)'::regprocedure,
               'dp.merge_median(int8[], int4, int4, float8, float8)'::regprocedure,
               'dp.merge_median(int8[], int8, int8)'::regprocedure,
               'dp.merge_median(int8[], int8, int8, float8)'::regprocedure,
               'dp.merge_median(int8[], int8, int8, float8, float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8, float8, float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8, float8, float8, float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8, float8, float8, float8, float8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int4, int4)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int4, int4, float8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int4, int4, float8, float8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int8, int8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int8, int8, float8)'::regprocedure,
               'dp.merge_percentile(int8[], float8, int8, int8, float8, float8)'::regprocedure,
               'dp.merge_percentile_em(float8[], float8, float8, float8)'::regprocedure,
               'dp.merge_percentile_em(float8[], float8, float8, float8, float8)'::regprocedure,
               'dp.merge_percentile_em(int8[], float8, int4, int4)'::regprocedure,
               'dp.merge_percentile_em(int8[], float8, int4, int4, float8)'::regprocedure,
               'dp.merge_percentile_em(int8[], float8, int8, int8)'::regprocedure,
               'dp.merge_percentile_em(int8[], float8, int8, int8, float8)'::regprocedure);

-- Automatic bounds: dp_sum and dp_avg without bounds keep a histogram of binary magnitudes. The exact
-- query groups by each such value's bin too (dp.exact_magnitude(value, false)) and writes ARRAY[bin,
-- rows, Σ significands] (dp.exact_magnitude(value, true) summed); dp.merge_auto_* add the bins into
-- the same histogram and release with the same final function. Quantiles without bounds keep their
-- values, merged like the bounded ones.
CREATE FUNCTION dp.exact_magnitude(value "any", significand bool) RETURNS int8
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_exact_magnitude';
COMMENT ON FUNCTION dp.exact_magnitude("any", bool) IS 'pg_dp internal: one row''s magnitude bin as dp_sum and dp_avg without bounds count it, or (significand) what it adds to the bin''s significand sum; NULL for NULL and NaN. Run only by the exact query of a DP level over a Citus table';
REVOKE EXECUTE ON FUNCTION dp.exact_magnitude("any", bool) FROM PUBLIC;
CREATE FUNCTION dp.merge_auto_trans(internal, numeric[]) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_auto_trans';
CREATE FUNCTION dp.merge_auto_trans(internal, numeric[], float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_auto_trans';
COMMENT ON FUNCTION dp.merge_auto_trans(internal, numeric[]) IS 'pg_dp internal: transition function of the merge aggregates of dp_sum and dp_avg without bounds (a group''s magnitude bins from the workers)';
COMMENT ON FUNCTION dp.merge_auto_trans(internal, numeric[], float8) IS 'pg_dp internal: transition function of the merge aggregates of dp_sum and dp_avg without bounds (a group''s magnitude bins from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_auto_trans(internal, numeric[]), dp.merge_auto_trans(internal, numeric[], float8) FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any") FROM PUBLIC;
CREATE FUNCTION dp.merge_quantile_trans(internal, "any", "any") RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_merge_quantile_trans';
COMMENT ON FUNCTION dp.merge_quantile_trans(internal, "any", "any") IS 'pg_dp internal: transition function of the quantiles'' merge aggregates (a group''s values and their counts from the workers)';
REVOKE EXECUTE ON FUNCTION dp.merge_quantile_trans(internal, "any", "any") FROM PUBLIC;
CREATE AGGREGATE dp.merge_auto_sum_int2(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_int8);
COMMENT ON AGGREGATE dp.merge_auto_sum_int2(numeric[]) IS 'pg_dp internal: dp_sum over int2 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int2(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_int8);
COMMENT ON AGGREGATE dp.merge_auto_sum_int2(numeric[], float8) IS 'pg_dp internal: dp_sum over int2 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int4(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_int8);
COMMENT ON AGGREGATE dp.merge_auto_sum_int4(numeric[]) IS 'pg_dp internal: dp_sum over int4 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int4(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_int8);
COMMENT ON AGGREGATE dp.merge_auto_sum_int4(numeric[], float8) IS 'pg_dp internal: dp_sum over int4 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int8(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_sum_int8(numeric[]) IS 'pg_dp internal: dp_sum over int8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_int8(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_sum_int8(numeric[], float8) IS 'pg_dp internal: dp_sum over int8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_float8(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_float8);
COMMENT ON AGGREGATE dp.merge_auto_sum_float8(numeric[]) IS 'pg_dp internal: dp_sum over float8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_float8(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_float8);
COMMENT ON AGGREGATE dp.merge_auto_sum_float8(numeric[], float8) IS 'pg_dp internal: dp_sum over float8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_numeric(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_sum_numeric(numeric[]) IS 'pg_dp internal: dp_sum over numeric without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_sum_numeric(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_sum_numeric(numeric[], float8) IS 'pg_dp internal: dp_sum over numeric without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_avg_float8(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_float8);
COMMENT ON AGGREGATE dp.merge_auto_avg_float8(numeric[]) IS 'pg_dp internal: dp_avg over float8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_avg_float8(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_float8);
COMMENT ON AGGREGATE dp.merge_auto_avg_float8(numeric[], float8) IS 'pg_dp internal: dp_avg over float8 without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_avg_numeric(numeric[]) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_avg_numeric(numeric[]) IS 'pg_dp internal: dp_avg over numeric without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_auto_avg_numeric(numeric[], float8) (SFUNC = dp.merge_auto_trans, STYPE = internal, FINALFUNC = dp.auto_final_numeric);
COMMENT ON AGGREGATE dp.merge_auto_avg_numeric(numeric[], float8) IS 'pg_dp internal: dp_avg over numeric without bounds from a group''s magnitude bins counted on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(float8[]) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_auto_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[]) IS 'pg_dp internal: dp_median over float8 without bounds from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_median(float8[], float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.median_auto_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_median(float8[], float8) IS 'pg_dp internal: dp_median over float8 without bounds from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_auto_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8) IS 'pg_dp internal: dp_percentile over float8 without bounds from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
CREATE AGGREGATE dp.merge_percentile(float8[], float8, float8) (SFUNC = dp.merge_quantile_trans, STYPE = internal, FINALFUNC = dp.percentile_auto_final, FINALFUNC_MODIFY = READ_WRITE);
COMMENT ON AGGREGATE dp.merge_percentile(float8[], float8, float8) IS 'pg_dp internal: dp_percentile over float8 without bounds from a group''s values and their counts computed on the Citus workers; written only by pg_dp''s rewrite of a DP level over a Citus table (the query check refuses it in queries)';
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp.merge_auto_sum_int2(numeric[])'::regprocedure,
               'dp.merge_auto_sum_int2(numeric[], float8)'::regprocedure,
               'dp.merge_auto_sum_int4(numeric[])'::regprocedure,
               'dp.merge_auto_sum_int4(numeric[], float8)'::regprocedure,
               'dp.merge_auto_sum_int8(numeric[])'::regprocedure,
               'dp.merge_auto_sum_int8(numeric[], float8)'::regprocedure,
               'dp.merge_auto_sum_float8(numeric[])'::regprocedure,
               'dp.merge_auto_sum_float8(numeric[], float8)'::regprocedure,
               'dp.merge_auto_sum_numeric(numeric[])'::regprocedure,
               'dp.merge_auto_sum_numeric(numeric[], float8)'::regprocedure,
               'dp.merge_auto_avg_float8(numeric[])'::regprocedure,
               'dp.merge_auto_avg_float8(numeric[], float8)'::regprocedure,
               'dp.merge_auto_avg_numeric(numeric[])'::regprocedure,
               'dp.merge_auto_avg_numeric(numeric[], float8)'::regprocedure,
               'dp.merge_median(float8[])'::regprocedure,
               'dp.merge_median(float8[], float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8)'::regprocedure,
               'dp.merge_percentile(float8[], float8, float8)'::regprocedure);

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

-- 0.2.0: NULL arguments of the admin API are refused with 22004 naming the argument; a budget period
-- keeps what was spent; dp.export_ledger with NULL bounds is unbounded; dp.set_domain refuses an empty
-- or NULL-holding array; dp.uncached_tables is readable by every role; dp.grammar lists what pg_dp
-- admits below a DP aggregate.
CREATE FUNCTION dp.refuse_nulls(func text, names text[], nulls bool[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    FOR i IN 1 .. coalesce(pg_catalog.array_length(names, 1), 0) LOOP
        IF nulls[i] THEN
            RAISE EXCEPTION '%: % must not be NULL', func, names[i] USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dp.refuse_nulls(text, text[], bool[]) IS 'pg_dp internal: raises 22004 naming the first argument of the admin function func that is NULL';
REVOKE EXECUTE ON FUNCTION dp.refuse_nulls(text, text[], bool[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.refuse_nulls(text, text[], bool[]) TO dp_admin;
CREATE OR REPLACE FUNCTION dp.check_epsilon_delta(epsilon float8, delta float8) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF epsilon IS NULL OR delta IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', CASE WHEN epsilon IS NULL THEN 'epsilon' ELSE 'delta' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF epsilon IS NULL OR epsilon = 'NaN'::float8 OR epsilon < 0 OR epsilon > 1e6 OR epsilon = 'Infinity'::float8 THEN
        RAISE EXCEPTION 'epsilon must be a finite number between 0 and 1e6, got %', coalesce(epsilon::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF delta IS NULL OR delta = 'NaN'::float8 OR delta < 0 OR delta >= 1 THEN
        RAISE EXCEPTION 'delta must be at least 0 and less than 1, got %', coalesce(delta::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
CREATE OR REPLACE FUNCTION dp.grant_budget(role regrole, epsilon float8, delta float8 DEFAULT 0) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u uuid;
BEGIN
    PERFORM dp.refuse_nulls('dp.grant_budget', ARRAY['role'], ARRAY[role IS NULL]);
    PERFORM dp.check_epsilon_delta(epsilon, delta);
    u := dp.ensure_role_uid(role);
    INSERT INTO dp.role_budget AS b (role_uid, role_name, epsilon_granted, delta_granted)
    VALUES (u, (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = role), epsilon::text::numeric, delta::text::numeric)
    ON CONFLICT ON CONSTRAINT role_budget_pkey DO UPDATE
       SET epsilon_granted = b.epsilon_granted + EXCLUDED.epsilon_granted,
           delta_granted   = b.delta_granted + EXCLUDED.delta_granted,
           role_name       = EXCLUDED.role_name,
           updated_at      = pg_catalog.now();
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = u;
END
$$;
CREATE OR REPLACE FUNCTION dp.set_budget(role regrole, epsilon float8, delta float8 DEFAULT 0,
                              max_epsilon_per_query float8 DEFAULT NULL) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u uuid;
BEGIN
    PERFORM dp.refuse_nulls('dp.set_budget', ARRAY['role'], ARRAY[role IS NULL]);
    PERFORM dp.check_epsilon_delta(epsilon, delta);
    IF max_epsilon_per_query IS NOT NULL
       AND NOT (max_epsilon_per_query > 0 AND max_epsilon_per_query <= 1e6) THEN
        RAISE EXCEPTION 'max_epsilon_per_query must be NULL or a number greater than 0 and at most 1e6, got %',
            max_epsilon_per_query USING ERRCODE = 'invalid_parameter_value';
    END IF;
    u := dp.ensure_role_uid(role);
    INSERT INTO dp.role_budget AS b (role_uid, role_name, epsilon_granted, delta_granted, max_epsilon_per_query)
    VALUES (u, (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = role), epsilon::text::numeric, delta::text::numeric, max_epsilon_per_query::text::numeric)
    ON CONFLICT ON CONSTRAINT role_budget_pkey DO UPDATE
       SET epsilon_granted       = EXCLUDED.epsilon_granted,
           delta_granted         = EXCLUDED.delta_granted,
           max_epsilon_per_query = EXCLUDED.max_epsilon_per_query,
           role_name             = EXCLUDED.role_name,
           updated_at            = pg_catalog.now();
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = u;
END
$$;
CREATE OR REPLACE FUNCTION dp.revoke_budget(role regrole) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT dp.refuse_nulls('dp.revoke_budget', ARRAY['role'], ARRAY[role IS NULL]);
    -- nothing remains, and what was spent stays: a later grant adds to it, never erases it
    UPDATE dp.role_budget b
       SET epsilon_granted = b.epsilon_spent, delta_granted = b.delta_spent, updated_at = pg_catalog.now()
     WHERE b.role_uid = dp.role_uid(revoke_budget.role);
$$;
CREATE OR REPLACE FUNCTION dp.set_budget_period(role regrole, period interval) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_budget_period', ARRAY['role'], ARRAY[role IS NULL]);
    IF period IS NOT NULL AND NOT (period >= interval '1 hour') THEN
        RAISE EXCEPTION 'period must be NULL or at least 1 hour, got %', period USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM dp.role_budget b WHERE b.role_uid = dp.role_uid(set_budget_period.role)) THEN
        RAISE EXCEPTION 'role % has no privacy budget', role USING ERRCODE = 'invalid_parameter_value',
            HINT = 'grant one first: SELECT dp.grant_budget(role, epsilon)';
    END IF;
    -- a new period starts now, with what was spent so far: setting a period (or turning it off and
    -- on again) never refills a budget; the first renewal comes one period from now
    UPDATE dp.role_budget b
       SET period = set_budget_period.period,
           period_start = CASE WHEN set_budget_period.period IS NULL THEN NULL ELSE pg_catalog.now() END,
           updated_at = pg_catalog.now()
     WHERE b.role_uid = dp.role_uid(set_budget_period.role);
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = dp.role_uid(set_budget_period.role);
END
$$;
CREATE OR REPLACE FUNCTION dp.adopt_budget(role regrole, role_uid uuid) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    own    uuid := dp.role_uid(role);
    holder regrole := (SELECT i.role FROM dp.role_identities i WHERE i.role_uid = adopt_budget.role_uid);
BEGIN
    PERFORM dp.refuse_nulls('dp.adopt_budget', ARRAY['role', 'role_uid'], ARRAY[role IS NULL, adopt_budget.role_uid IS NULL]);
    IF own IS DISTINCT FROM adopt_budget.role_uid THEN
        IF own IS NOT NULL THEN
            RAISE EXCEPTION 'role % already has pg_dp identity %: it cannot adopt another', role, own
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'a superuser can remove its identity first (SECURITY LABEL FOR pg_dp_role ON ROLE ... IS NULL); the budgets of that identity, in every database, then belong to no role';
        END IF;
        IF holder IS NOT NULL THEN
            RAISE EXCEPTION 'role_uid % is the pg_dp identity of role %: it cannot be adopted by role %', adopt_budget.role_uid, holder, role
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT EXISTS (SELECT FROM dp.role_budget b WHERE b.role_uid = adopt_budget.role_uid)
           AND NOT EXISTS (SELECT FROM dp.release_log l WHERE l.role_uid = adopt_budget.role_uid) THEN
            RAISE EXCEPTION 'role_uid % has no budget and no receipt in database %', adopt_budget.role_uid, pg_catalog.current_database()
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'dp.budgets lists the role_uid of every budget of this database, with role NULL when no role carries it';
        END IF;
        EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp_role ON ROLE %s IS %L', role, adopt_budget.role_uid);
    END IF;
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = adopt_budget.role_uid;
END
$$;
CREATE OR REPLACE FUNCTION dp.purge_receipts(older_than interval) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM dp.refuse_nulls('dp.purge_receipts', ARRAY['older_than'], ARRAY[older_than IS NULL]);
    IF older_than < interval '0' THEN
        RAISE EXCEPTION 'older_than must be an interval of at least 0, got %', coalesce(older_than::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM dp.release_log l WHERE l.charged_at < pg_catalog.clock_timestamp() - older_than;
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM dp.query_text q WHERE NOT EXISTS (SELECT FROM dp.release_log l WHERE l.query_id = q.query_id);
    RETURN n;
END
$$;
CREATE OR REPLACE FUNCTION dp.export_ledger(since timestamptz DEFAULT '-infinity', until timestamptz DEFAULT 'infinity') RETURNS SETOF jsonb
LANGUAGE sql STABLE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.to_jsonb(l) FROM dp.ledger l
     WHERE l.charged_at >= coalesce(since, '-infinity') AND l.charged_at < coalesce(until, 'infinity') ORDER BY l.id;
$$;
CREATE OR REPLACE FUNCTION dp.protect_table(tbl regclass, privacy_unit name DEFAULT NULL, max_groups_contributed int DEFAULT 1,
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
CREATE OR REPLACE FUNCTION dp.set_domain(tbl regclass, col name, vals anyarray) RETURNS void
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
CREATE OR REPLACE FUNCTION dp.set_domain(tbl regclass, col name, keys regclass, key_column name) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_domain', ARRAY['tbl', 'col', 'keys', 'key_column'],
                            ARRAY[tbl IS NULL, col IS NULL, keys IS NULL, key_column IS NULL]);
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON COLUMN %s.%I IS %L', tbl, col,
        pg_catalog.json_build_object('domain', pg_catalog.json_build_object('table', keys::text, 'column', key_column))::text);
END
$$;
CREATE OR REPLACE FUNCTION dp.drop_domain(tbl regclass, col name) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT dp.refuse_nulls('dp.drop_domain', ARRAY['tbl', 'col'], ARRAY[tbl IS NULL, col IS NULL]);
    SELECT dp.drop_column_declaration(tbl, col, 'domain');
$$;
CREATE OR REPLACE FUNCTION dp.unprotect_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.unprotect_table', ARRAY['tbl'], ARRAY[tbl IS NULL]);
    PERFORM dp.relabel_table(tbl, 'protected', false);
END
$$;
CREATE OR REPLACE FUNCTION dp.trust_role(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.trust_role', ARRAY['role'], ARRAY[role IS NULL]);
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON ROLE %s IS %L', role, 'trusted');
END
$$;
CREATE OR REPLACE FUNCTION dp.distrust_role(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.distrust_role', ARRAY['role'], ARRAY[role IS NULL]);
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON ROLE %s IS NULL', role);
END
$$;
CREATE OR REPLACE FUNCTION dp.set_bounds(tbl regclass, col name, lower numeric, upper numeric) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_bounds', ARRAY['tbl', 'col'], ARRAY[tbl IS NULL, col IS NULL]);
    IF lower IS NULL OR upper IS NULL THEN
        RAISE EXCEPTION 'lower and upper must not be NULL (dp.drop_bounds removes bounds)' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    EXECUTE pg_catalog.format('SECURITY LABEL FOR pg_dp ON COLUMN %s.%I IS %L', tbl, col,
        pg_catalog.json_build_object('bounds', pg_catalog.json_build_object('lower', pg_catalog.trim_scale(lower)::text, 'upper', pg_catalog.trim_scale(upper)::text))::text);
END
$$;
CREATE OR REPLACE FUNCTION dp.drop_bounds(tbl regclass, col name) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT dp.refuse_nulls('dp.drop_bounds', ARRAY['tbl', 'col'], ARRAY[tbl IS NULL, col IS NULL]);
    SELECT dp.drop_column_declaration(tbl, col, 'bounds');
$$;
CREATE OR REPLACE FUNCTION dp.learn_bounds(public_table regclass, public_column name, target_table regclass, target_column name,
                                lower_quantile float8 DEFAULT 0, upper_quantile float8 DEFAULT 1,
                                OUT lower numeric, OUT upper numeric)
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.learn_bounds', ARRAY['public_table', 'public_column', 'target_table', 'target_column', 'lower_quantile', 'upper_quantile'],
                            ARRAY[public_table IS NULL, public_column IS NULL, target_table IS NULL, target_column IS NULL,
                                  lower_quantile IS NULL, upper_quantile IS NULL]);
    IF lower_quantile IS NULL OR upper_quantile IS NULL OR NOT (0 <= lower_quantile AND lower_quantile < upper_quantile AND upper_quantile <= 1) THEN
        RAISE EXCEPTION 'lower_quantile and upper_quantile must satisfy 0 <= lower_quantile < upper_quantile <= 1, got % and %',
            coalesce(lower_quantile::text, 'NULL'), coalesce(upper_quantile::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF dp.is_protected(public_table) THEN
        RAISE EXCEPTION 'table % is protected: bounds are learned from a public table only', public_table
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'use a public reference table (a census extract, a published dataset), or let the aggregates choose DP bounds';
    END IF;
    -- a plain table without row security, and a column of a built-in numeric type: a view (over a
    -- protected table, say) or a policy function would read other data, or run someone else's code,
    -- with the caller's rights
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = public_table AND c.relkind IN ('r', 'p') AND NOT c.relrowsecurity) THEN
        RAISE EXCEPTION 'table % must be a plain table without row security to learn bounds from', public_table
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = public_table AND a.attname = public_column
                      AND NOT a.attisdropped AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype,
                                                              'float4'::regtype, 'float8'::regtype, 'numeric'::regtype)) THEN
        RAISE EXCEPTION 'column % of table % must be a column of type smallint, integer, bigint, real, double precision or numeric', public_column, public_table
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    -- the caller reads the public table with its own privileges; set_bounds checks dp_admin
    EXECUTE pg_catalog.format(
        'SELECT pg_catalog.percentile_disc(%s) WITHIN GROUP (ORDER BY v)::numeric, pg_catalog.percentile_disc(%s) WITHIN GROUP (ORDER BY v)::numeric
           FROM (SELECT %I::numeric AS v FROM %s) s WHERE v IS NOT NULL AND v <> ''NaN''::numeric',
        lower_quantile, upper_quantile, public_column, public_table) INTO lower, upper;
    IF lower IS NULL THEN
        RAISE EXCEPTION 'column % of table % has no values to learn bounds from', public_column, public_table
            USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM dp.set_bounds(target_table, target_column, lower, upper);
END
$$;
CREATE OR REPLACE FUNCTION dp.set_release_cache(tbl regclass, enabled bool) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_release_cache', ARRAY['tbl', 'enabled'], ARRAY[tbl IS NULL, enabled IS NULL]);
    PERFORM dp.relabel_table(tbl, 'no_release_cache', NOT enabled);
END
$$;
COMMENT ON FUNCTION dp.set_budget_period(regrole, interval) IS 'pg_dp: renews a role''s granted epsilon and delta every period (at least 1 hour; NULL: no period); the current period starts now and keeps what was spent so far, so the first renewal comes one period from now; at each renewal spending moves to lifetime totals, never erased (dp_admin)';
COMMENT ON FUNCTION dp.export_ledger(timestamptz, timestamptz) IS 'pg_dp: the receipts charged in [since, until) (a NULL bound: unbounded), one JSON object each, for audits (reads dp.ledger with the caller''s rights: superusers and dp_admin); for CSV, COPY (SELECT * FROM dp.ledger) TO STDOUT WITH CSV HEADER';
CREATE FUNCTION dp.grammar(OUT construct text, OUT could_fail_by text, OUT why_it_cannot text)
    RETURNS SETOF record LANGUAGE c IMMUTABLE ROWS 20 AS 'MODULE_PATHNAME', 'dp_grammar';
COMMENT ON FUNCTION dp.grammar() IS 'pg_dp: every kind of expression pg_dp admits below a DP aggregate, how it could fail at run time, and why it cannot for any stored value (or the guard that refuses the forms where it could); anything not listed is refused';
CREATE VIEW dp.grammar AS SELECT * FROM dp.grammar();
COMMENT ON VIEW dp.grammar IS 'pg_dp: what pg_dp admits below a DP aggregate (dp.grammar()); the README''s section "Aggregates" gives the rules for whole queries';
GRANT SELECT ON dp.grammar TO PUBLIC;
GRANT SELECT ON dp.uncached_tables TO PUBLIC;

-- cached plans follow the pinned level and the session settings
CREATE FUNCTION dp.invalidate_plans() RETURNS void
    LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'dp_invalidate_plans';
COMMENT ON FUNCTION dp.invalidate_plans() IS 'pg_dp internal: when the transaction commits, every session plans its cached statements with DP aggregates again (they read the pinned privacy level again); run by dp.pin_privacy_level';
REVOKE EXECUTE ON FUNCTION dp.invalidate_plans() FROM PUBLIC;

CREATE OR REPLACE FUNCTION dp.pin_privacy_level(role regrole, level text) RETURNS SETOF dp.budgets
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    u uuid;
BEGIN
    PERFORM dp.refuse_nulls('dp.pin_privacy_level', ARRAY['role'], ARRAY[role IS NULL]);
    IF level IS NOT NULL THEN
        PERFORM dp.privacy_level_epsilon(level);  -- an unknown level: an error that lists the valid ones
    END IF;
    u := dp.ensure_role_uid(role);
    INSERT INTO dp.role_budget AS b (role_uid, role_name, privacy_level)
    VALUES (u, (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = role), level)
    ON CONFLICT ON CONSTRAINT role_budget_pkey DO UPDATE
       SET privacy_level = EXCLUDED.privacy_level,
           role_name     = EXCLUDED.role_name,
           updated_at    = pg_catalog.now();
    -- the role's sessions in this database start at its level (from their next connection)
    IF level IS NULL THEN
        EXECUTE pg_catalog.format('ALTER ROLE %s IN DATABASE %I RESET dp.privacy_level', role, pg_catalog.current_database());
    ELSE
        EXECUTE pg_catalog.format('ALTER ROLE %s IN DATABASE %I SET dp.privacy_level = %L', role, pg_catalog.current_database(), level);
    END IF;
    -- open sessions plan their cached DP statements again, at the pinned level (from commit)
    PERFORM dp.invalidate_plans();
    RETURN QUERY SELECT * FROM dp.budgets b WHERE b.role_uid = u;
END
$$;

-- dp_interval_low and dp_interval_high

CREATE FUNCTION dp_interval_low(value anyelement) RETURNS float8
    LANGUAGE c STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_interval_unbound';
COMMENT ON FUNCTION dp_interval_low(anyelement) IS 'pg_dp: around a pg_dp aggregate call in a DP query (dp_interval_low(dp_avg(x, 0, 100))), the low end of the 95% interval of that release: the released value minus the half-width its receipt states, computed from public parameters only (for dp_avg, dp_variance and dp_stddev from its own noisy statistics); NULL for dp_percentile_em. Free: it releases nothing new';
CREATE FUNCTION dp_interval_high(value anyelement) RETURNS float8
    LANGUAGE c STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_interval_unbound';
COMMENT ON FUNCTION dp_interval_high(anyelement) IS 'pg_dp: around a pg_dp aggregate call in a DP query (dp_interval_high(dp_count(*))), the high end of the 95% interval of that release: the released value plus the half-width its receipt states; NULL for dp_percentile_em. Free: it releases nothing new';

CREATE FUNCTION dp.interval_half_width_final(state int4) RETURNS float8
    LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_interval_half_width';
COMMENT ON FUNCTION dp.interval_half_width_final(int4) IS 'pg_dp internal: final function of dp.interval_half_width';
-- reads no row: int4larger keeps the tag; the final function reads the receipt of the release of the
-- call tagged by its argument, in the same aggregation
CREATE AGGREGATE dp.interval_half_width(tag int4) (
    SFUNC = int4larger, STYPE = int4, COMBINEFUNC = int4larger,
    FINALFUNC = dp.interval_half_width_final, PARALLEL = SAFE);
COMMENT ON AGGREGATE dp.interval_half_width(int4) IS 'pg_dp internal: the 95% half-width of the receipt of the release, in the same aggregation and group, of the pg_dp aggregate call tagged tag; for dp_interval_low and dp_interval_high';
CREATE FUNCTION dp.interval_bound(value anyelement, half_width float8, high bool) RETURNS float8
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_interval_bound';
COMMENT ON FUNCTION dp.interval_bound(anyelement, float8, bool) IS 'pg_dp internal: a released value minus (high false) or plus (high true) its half-width, as float8, for dp_interval_low and dp_interval_high';

-- Arithmetic that cannot fail, below a DP aggregate (src/query/arithmetic.rs): the grammar makes the
-- operator nodes of + - * / % it admits there call these instead of their own functions. Each reads
-- its operator and operand types from its node; called directly, it refuses. VOLATILE: the planner
-- never evaluates them outside their node (folding bound parameters, estimating selectivity).
CREATE FUNCTION dp.total_int2("any", "any") RETURNS int2 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int4("any", "any") RETURNS int4 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int8("any", "any") RETURNS int8 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_float4("any", "any") RETURNS float4 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_float8("any", "any") RETURNS float8 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_numeric("any", "any") RETURNS numeric LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int2("any") RETURNS int2 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int4("any") RETURNS int4 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
CREATE FUNCTION dp.total_int8("any") RETURNS int8 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_arith';
COMMENT ON FUNCTION dp.total_int2("any", "any") IS 'pg_dp internal: smallint + - * / % below a DP aggregate, saturated at the smallint range; division or remainder by 0 gives NULL';
COMMENT ON FUNCTION dp.total_int4("any", "any") IS 'pg_dp internal: integer + - * / % below a DP aggregate, saturated at the integer range; division or remainder by 0 gives NULL';
COMMENT ON FUNCTION dp.total_int8("any", "any") IS 'pg_dp internal: bigint + - * / % below a DP aggregate, saturated at the bigint range; division or remainder by 0 gives NULL';
COMMENT ON FUNCTION dp.total_float4("any", "any") IS 'pg_dp internal: real + - * / below a DP aggregate, IEEE (overflow gives ±Infinity, no underflow error); division by 0 gives NULL';
COMMENT ON FUNCTION dp.total_float8("any", "any") IS 'pg_dp internal: double precision + - * / below a DP aggregate, IEEE (overflow gives ±Infinity, no underflow error); division by 0 gives NULL';
COMMENT ON FUNCTION dp.total_numeric("any", "any") IS 'pg_dp internal: numeric + - * / % below a DP aggregate; overflow gives ±Infinity, division or remainder by 0 gives NULL';
COMMENT ON FUNCTION dp.total_int2("any") IS 'pg_dp internal: smallint unary minus below a DP aggregate, saturated';
COMMENT ON FUNCTION dp.total_int4("any") IS 'pg_dp internal: integer unary minus below a DP aggregate, saturated';
COMMENT ON FUNCTION dp.total_int8("any") IS 'pg_dp internal: bigint unary minus below a DP aggregate, saturated';

-- Plans of DP queries with a date or time read from the clock (current_date - 30, now() - interval '1 day')
-- depend on this view: each execution queues its invalidation, so that the next transaction plans again and
-- reads the clock again (src/query/clock.rs).
CREATE VIEW dp.clock AS SELECT pg_catalog.now() AS now;
COMMENT ON VIEW dp.clock IS 'pg_dp internal: the plans of DP queries with a constant read from the clock depend on this view, and are planned again in each transaction';
GRANT SELECT ON dp.clock TO PUBLIC;

-- Dates and times on columns below a DP aggregate, in total forms (src/query/datetime.rs): date_trunc with a
-- constant unit, and the operators date ± integer, date − date, timestamp ± interval, timestamp − timestamp.
CREATE FUNCTION dp.total_date_trunc_ts(text, timestamp) RETURNS timestamp LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_date_trunc';
CREATE FUNCTION dp.total_date_trunc_tstz(text, timestamptz) RETURNS timestamptz LANGUAGE c STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_date_trunc';
CREATE FUNCTION dp.total_date("any", "any") RETURNS date LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
CREATE FUNCTION dp.total_date_diff("any", "any") RETURNS int4 LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
CREATE FUNCTION dp.total_timestamp("any", "any") RETURNS timestamp LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
CREATE FUNCTION dp.total_timestamptz("any", "any") RETURNS timestamptz LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
CREATE FUNCTION dp.total_interval("any", "any") RETURNS interval LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_datetime';
COMMENT ON FUNCTION dp.total_date_trunc_ts(text, timestamp) IS 'pg_dp internal: date_trunc below a DP aggregate: infinities stay, values within 1,001 years of the start of the range or 8 days of its end give NULL';
COMMENT ON FUNCTION dp.total_date_trunc_tstz(text, timestamptz) IS 'pg_dp internal: date_trunc below a DP aggregate: infinities stay, values within 1,001 years of the start of the range or 8 days of its end give NULL';
COMMENT ON FUNCTION dp.total_date("any", "any") IS 'pg_dp internal: date ± integer below a DP aggregate, saturated at ±infinity';
COMMENT ON FUNCTION dp.total_date_diff("any", "any") IS 'pg_dp internal: date − date below a DP aggregate; NULL when one is infinite';
COMMENT ON FUNCTION dp.total_timestamp("any", "any") IS 'pg_dp internal: timestamp (or date) ± interval below a DP aggregate; NULL when the result could leave the range';
COMMENT ON FUNCTION dp.total_timestamptz("any", "any") IS 'pg_dp internal: timestamptz ± interval below a DP aggregate; NULL when the result could leave the range';
COMMENT ON FUNCTION dp.total_interval("any", "any") IS 'pg_dp internal: timestamp − timestamp below a DP aggregate; NULL when one is infinite';
CREATE FUNCTION dp.total_date_to_timestamp(date) RETURNS timestamp LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_date_to_timestamp';
CREATE FUNCTION dp.total_date_to_timestamptz(date) RETURNS timestamptz LANGUAGE c STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_date_to_timestamp';
COMMENT ON FUNCTION dp.total_date_to_timestamp(date) IS 'pg_dp internal: date to timestamp below a DP aggregate; dates past the ends of the timestamp range become ±infinity';
COMMENT ON FUNCTION dp.total_date_to_timestamptz(date) IS 'pg_dp internal: date to timestamptz below a DP aggregate; dates past the ends of the timestamp range become ±infinity';
CREATE FUNCTION dp.total_timestamp_to_date(timestamp) RETURNS date LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_timestamp_to_date';
CREATE FUNCTION dp.total_timestamptz_to_date(timestamptz) RETURNS date LANGUAGE c STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_total_timestamp_to_date';
COMMENT ON FUNCTION dp.total_timestamp_to_date(timestamp) IS 'pg_dp internal: timestamp to date below a DP aggregate; values within 8 days of the ends of the range become ±infinity';
COMMENT ON FUNCTION dp.total_timestamptz_to_date(timestamptz) IS 'pg_dp internal: timestamptz to date below a DP aggregate; values within 8 days of the ends of the range become ±infinity';

-- Statistics of relations without protected data, for roles restricted by pg_dp (src/query/statistics_mask.rs):
-- the statistics columns of pg_class and the size functions are rewritten into these, NULL for relations that
-- hold protected data (a protected table, its partitions, indexes and TOAST table).
CREATE FUNCTION dp.class_stat(oid, anyelement) RETURNS anyelement LANGUAGE c STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_class_stat';
COMMENT ON FUNCTION dp.class_stat(oid, anyelement) IS 'pg_dp internal: a statistics column of pg_class (reltuples, relpages, relallvisible), NULL for relations that hold protected data';
CREATE FUNCTION dp.masked_relation_size(regclass) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_relation_size(regclass, text) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_table_size(regclass) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_total_relation_size(regclass) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_indexes_size(regclass) RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_size';
CREATE FUNCTION dp.masked_database_size(name) RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_null';
CREATE FUNCTION dp.masked_database_size(oid) RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_null';
CREATE FUNCTION dp.masked_tablespace_size(name) RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_null';
CREATE FUNCTION dp.masked_tablespace_size(oid) RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_masked_null';
COMMENT ON FUNCTION dp.masked_relation_size(regclass) IS 'pg_dp internal: pg_relation_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_relation_size(regclass, text) IS 'pg_dp internal: pg_relation_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_table_size(regclass) IS 'pg_dp internal: pg_table_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_total_relation_size(regclass) IS 'pg_dp internal: pg_total_relation_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_indexes_size(regclass) IS 'pg_dp internal: pg_indexes_size for roles restricted by pg_dp, NULL for relations that hold protected data';
COMMENT ON FUNCTION dp.masked_database_size(name) IS 'pg_dp internal: pg_database_size for roles restricted by pg_dp: NULL (a database with protected tables counts their bytes)';
COMMENT ON FUNCTION dp.masked_database_size(oid) IS 'pg_dp internal: pg_database_size for roles restricted by pg_dp: NULL (a database with protected tables counts their bytes)';
COMMENT ON FUNCTION dp.masked_tablespace_size(name) IS 'pg_dp internal: pg_tablespace_size for roles restricted by pg_dp: NULL';
COMMENT ON FUNCTION dp.masked_tablespace_size(oid) IS 'pg_dp internal: pg_tablespace_size for roles restricted by pg_dp: NULL';

-- dp.last_releases lists the bounds a call without bounds chose
DROP FUNCTION dp.last_releases(int);
CREATE FUNCTION dp.last_releases(n int DEFAULT 10, OUT released_at timestamptz, OUT aggregate text, OUT value float8,
                                 OUT epsilon float8, OUT delta float8, OUT mechanism text, OUT noise_scale float8,
                                 OUT interval_95 float8, OUT lower float8, OUT upper float8)
    RETURNS SETOF record LANGUAGE c VOLATILE ROWS 10 AS 'MODULE_PATHNAME', 'dp_last_releases';
COMMENT ON FUNCTION dp.last_releases(int) IS 'pg_dp: the n (at most 100) newest releases this session received, newest first: value (as float8), epsilon, delta, mechanism, noise scale and a 95% interval half-width of the noise (for dp_avg, dp_variance and dp_stddev an approximate one of the result, from its own noisy statistics; for smooth-sensitivity quantiles at the largest possible scale; NULL for the exponential mechanism), and for a call without bounds the bounds it chose (automatic bounds; NULL otherwise). Releases of groups that HAVING dropped are not listed; a level''s releases are listed when it ends, by aggregate and value, with one time';

-- Public row counts (docs/privacy/avg.md, "dp_avg with a public count"): dp.set_public_count adds the word
-- public_count=<n> to the table's pg_dp label; a dp_avg over every row of the table (no WHERE, join,
-- GROUP BY, FILTER or privacy unit) of a NOT NULL column then divides by n and spends all of ε on the sum.
CREATE FUNCTION dp.set_public_count(tbl regclass, n bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dp.refuse_nulls('dp.set_public_count', ARRAY['tbl', 'n'], ARRAY[tbl IS NULL, n IS NULL]);
    IF n < 1 OR n > 9007199254740992 THEN
        RAISE EXCEPTION 'n must be an integer between 1 and 9007199254740992 (2^53), got %', n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the previous count's word first: a table has one
    PERFORM dp.drop_public_count(tbl);
    PERFORM dp.relabel_table(tbl, 'public_count=' || n, true);
END
$$;
COMMENT ON FUNCTION dp.set_public_count(regclass, bigint) IS 'pg_dp: declares the number of rows of a table public (a census, a published size): dp_avg over every row of the table (no WHERE, join, GROUP BY, FILTER or privacy unit) of a NOT NULL column divides by it and spends all of epsilon on the sum. It must be public knowledge, not read from the data for a release (dp_admin)';

CREATE FUNCTION dp.drop_public_count(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w text;
BEGIN
    PERFORM dp.refuse_nulls('dp.drop_public_count', ARRAY['tbl'], ARRAY[tbl IS NULL]);
    FOR w IN SELECT trim(x) FROM pg_catalog.pg_seclabel l, unnest(string_to_array(l.label, ',')) x
              WHERE l.objoid = tbl AND l.classoid = 'pg_catalog.pg_class'::regclass AND l.objsubid = 0
                AND l.provider = 'pg_dp' AND trim(x) LIKE 'public\_count=%' LOOP
        PERFORM dp.relabel_table(tbl, w, false);
    END LOOP;
END
$$;
COMMENT ON FUNCTION dp.drop_public_count(regclass) IS 'pg_dp: removes the public row count of a table (dp_admin)';
REVOKE EXECUTE ON FUNCTION dp.set_public_count(regclass, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.drop_public_count(regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.set_public_count(regclass, bigint) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.drop_public_count(regclass) TO dp_admin;
-- Integer columns -----------------------------------------------------------------------------
-- dp_median, dp_percentile and dp_percentile_em over integer (int4) and bigint (int8) values with
-- bounds of the same type: the grid is the integers themselves (spacing 1, a power of two only for
-- bounds more than 2^41 apart), so every candidate and every result is an integer (returned as
-- float8, like the float8 forms). An int4 column with integer bounds resolves to the int4 forms, an
-- int8 column to the int8 forms; a smallint column with integer literal bounds resolves to the int4
-- forms, with smallint bounds to the float8 ones. The same final functions as the float8 forms.
-- Derivation: docs/privacy/percentile-em.md and smooth-sensitivity.md, "Integer columns".
CREATE FUNCTION dp.median_trans(internal, int4, int4, int4) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int4_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int4, int4, int4) IS 'pg_dp internal: transition function of dp_median(value, lower, upper) over integer values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int4, int4, int4) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int4, lower int4, upper int4) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int4, int4, int4) IS 'dp_median(value, lower, upper): median of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the five-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int4, int4, int4, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int4_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int4, int4, int4, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon) over integer values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int4, int4, int4, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int4, lower int4, upper int4, epsilon float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int4, int4, int4, float8) IS 'dp_median(value, lower, upper, epsilon): median of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); the five-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int4, int4, int4, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int4_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int4, int4, int4, float8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon, delta) over integer values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int4, int4, int4, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int4, lower int4, upper int4, epsilon float8, delta float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int4, int4, int4, float8, float8) IS 'dp_median(value, lower, upper, epsilon, delta): median of integer values clamped to [lower, upper] with smooth-sensitivity noise on the grid of the integers; (epsilon, delta)-DP (delta > 0: Laplace noise, delta = 0: the pure variant); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int4_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int4, p float8, lower int4, upper int4) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int4, float8, int4, int4) IS 'dp_percentile(value, p, lower, upper): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the six-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int4_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int4, p float8, lower int4, upper int4, epsilon float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int4, float8, int4, int4, float8) IS 'dp_percentile(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); the six-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int4_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon, delta) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int4, float8, int4, int4, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int4, p float8, lower int4, upper int4, epsilon float8, delta float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int4, float8, int4, int4, float8, float8) IS 'dp_percentile(value, p, lower, upper, epsilon, delta): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] with smooth-sensitivity noise on the grid of the integers; (epsilon, delta)-DP (delta > 0: Laplace noise, delta = 0: the pure variant); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_int4_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value int4, p float8, lower int4, upper int4) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(int4, float8, int4, int4) IS 'dp_percentile_em(value, p, lower, upper): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_int4_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4, float8) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper, epsilon) over integer values';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, int4, float8, int4, int4, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value int4, p float8, lower int4, upper int4, epsilon float8) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(int4, float8, int4, int4, float8) IS 'dp_percentile_em(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of integer values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int8, int8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int8_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int8, int8, int8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int8, int8, int8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int8, lower int8, upper int8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int8, int8, int8) IS 'dp_median(value, lower, upper): median of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the five-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int8, int8, int8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int8_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int8, int8, int8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int8, int8, int8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int8, lower int8, upper int8, epsilon float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int8, int8, int8, float8) IS 'dp_median(value, lower, upper, epsilon): median of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); the five-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.median_trans(internal, int8, int8, int8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_median_int8_trans';
COMMENT ON FUNCTION dp.median_trans(internal, int8, int8, int8, float8, float8) IS 'pg_dp internal: transition function of dp_median(value, lower, upper, epsilon, delta) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.median_trans(internal, int8, int8, int8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_median(value int8, lower int8, upper int8, epsilon float8, delta float8) (
    SFUNC = dp.median_trans, STYPE = internal, FINALFUNC = dp.median_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_median(int8, int8, int8, float8, float8) IS 'dp_median(value, lower, upper, epsilon, delta): median of bigint values clamped to [lower, upper] with smooth-sensitivity noise on the grid of the integers; (epsilon, delta)-DP (delta > 0: Laplace noise, delta = 0: the pure variant); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int8_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int8, p float8, lower int8, upper int8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int8, float8, int8, int8) IS 'dp_percentile(value, p, lower, upper): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); the six-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int8_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int8, p float8, lower int8, upper int8, epsilon float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int8, float8, int8, int8, float8) IS 'dp_percentile(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); the six-argument form (with delta) uses smooth sensitivity; result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_int8_trans';
COMMENT ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8, float8) IS 'pg_dp internal: transition function of dp_percentile(value, p, lower, upper, epsilon, delta) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_trans(internal, int8, float8, int8, int8, float8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile(value int8, p float8, lower int8, upper int8, epsilon float8, delta float8) (
    SFUNC = dp.percentile_trans, STYPE = internal, FINALFUNC = dp.percentile_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile(int8, float8, int8, int8, float8, float8) IS 'dp_percentile(value, p, lower, upper, epsilon, delta): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] with smooth-sensitivity noise on the grid of the integers; (epsilon, delta)-DP (delta > 0: Laplace noise, delta = 0: the pure variant); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_int8_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value int8, p float8, lower int8, upper int8) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(int8, float8, int8, int8) IS 'dp_percentile_em(value, p, lower, upper): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon = dp.default_epsilon or dp.privacy_level); result an integer within [lower, upper] (as float8); never NULL';
CREATE FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8, float8) RETURNS internal
    LANGUAGE c PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_percentile_em_int8_trans';
COMMENT ON FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8, float8) IS 'pg_dp internal: transition function of dp_percentile_em(value, p, lower, upper, epsilon) over bigint values';
REVOKE EXECUTE ON FUNCTION dp.percentile_em_trans(internal, int8, float8, int8, int8, float8) FROM PUBLIC;
CREATE AGGREGATE dp_percentile_em(value int8, p float8, lower int8, upper int8, epsilon float8) (
    SFUNC = dp.percentile_em_trans, STYPE = internal, FINALFUNC = dp.percentile_em_final,
    FINALFUNC_MODIFY = READ_WRITE, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_percentile_em(int8, float8, int8, int8, float8) IS 'dp_percentile_em(value, p, lower, upper, epsilon): p-quantile (p in [0, 1]) of bigint values clamped to [lower, upper] by the exponential mechanism over the integers in [lower, upper] (every 2^k-th integer only for bounds more than 2^41 apart); epsilon-DP (epsilon); result an integer within [lower, upper] (as float8); never NULL';

-- Noisy aggregates are VOLATILE (CREATE AGGREGATE records them as IMMUTABLE).
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
 WHERE oid IN ('dp_median(int4, int4, int4)'::regprocedure,
               'dp_median(int4, int4, int4, float8)'::regprocedure,
               'dp_median(int4, int4, int4, float8, float8)'::regprocedure,
               'dp_percentile(int4, float8, int4, int4)'::regprocedure,
               'dp_percentile(int4, float8, int4, int4, float8)'::regprocedure,
               'dp_percentile(int4, float8, int4, int4, float8, float8)'::regprocedure,
               'dp_percentile_em(int4, float8, int4, int4)'::regprocedure,
               'dp_percentile_em(int4, float8, int4, int4, float8)'::regprocedure,
               'dp_median(int8, int8, int8)'::regprocedure,
               'dp_median(int8, int8, int8, float8)'::regprocedure,
               'dp_median(int8, int8, int8, float8, float8)'::regprocedure,
               'dp_percentile(int8, float8, int8, int8)'::regprocedure,
               'dp_percentile(int8, float8, int8, int8, float8)'::regprocedure,
               'dp_percentile(int8, float8, int8, int8, float8, float8)'::regprocedure,
               'dp_percentile_em(int8, float8, int8, int8)'::regprocedure,
               'dp_percentile_em(int8, float8, int8, int8, float8)'::regprocedure);

-- Private synthetic microdata (sql/synthetic.sql)
CREATE FUNCTION dp.release_synthetic(source regclass, target text, columns text[], epsilon float8, delta float8 DEFAULT 0,
                                     bins int DEFAULT 16, bin_edges jsonb DEFAULT NULL, method text DEFAULT 'mst',
                                     criteria jsonb DEFAULT NULL, gamma float8 DEFAULT 0.1, epsilon0 float8 DEFAULT 0.01,
                                     refit boolean DEFAULT false, rows bigint DEFAULT NULL, min_count int DEFAULT 1,
                                     constraints text DEFAULT NULL)
    RETURNS jsonb LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'release_synthetic_wrapper';
COMMENT ON FUNCTION dp.release_synthetic(regclass, text, text[], float8, float8, int, jsonb, text, jsonb, float8, float8, boolean, bigint, int, text) IS
    'pg_dp: creates table target (owned by the caller) with a differentially private synthetic copy of columns of source (a table or partitioned table, one row per person) and target_report with the public report; (epsilon, delta)-DP in total for adding or removing one row (delta = 0: pure epsilon). Each column needs public values: a domain (dp.set_domain; NULL and values outside it are released as NULL), bin edges in bin_edges ({"column": [edges]}), or declared bounds (dp.set_bounds) cut into bins equal bins, or, with {"column": "private"}, into bins bins whose edges are chosen with DP after the charge (a tenth of epsilon for all such edges); booleans are their two values. method mst (a tree of 2-way marginals chosen privately), tree2 (a 2-tree of 3-column cliques) or privbayes. criteria (a JSON array) are acceptance criteria computed with DP; candidates are drawn until one passes them all by private selection (stopping probability gamma, epsilon0 for the cap on tries; refit fits a new model per try), and epsilon is split between the model, the criteria and the loop. Post-processing, free: rows (the number of rows drawn; NULL: the noisy row count), constraints (a boolean SQL expression over the columns: rows for which it is not true are drawn again, at most 20 draws per row) and min_count (rows whose binned values occur fewer times are dropped). Charged to the caller''s budget before the source is read; returns the receipt';

-- A DP release charged to the caller, like the aggregates: executable by everyone with a budget.
GRANT EXECUTE ON FUNCTION dp.release_synthetic(regclass, text, text[], float8, float8, int, jsonb, text, jsonb, float8, float8, boolean, bigint, int, text) TO PUBLIC;

CREATE FUNCTION dp.preview_synthetic(source regclass, columns text[], epsilon float8, delta float8 DEFAULT 0,
                                     bins int DEFAULT 16, bin_edges jsonb DEFAULT NULL, method text DEFAULT 'mst',
                                     criteria jsonb DEFAULT NULL, gamma float8 DEFAULT 0.1, epsilon0 float8 DEFAULT 0.01,
                                     refit boolean DEFAULT false, rows bigint DEFAULT NULL, min_count int DEFAULT 1,
                                     constraints text DEFAULT NULL, runs int DEFAULT 10)
    RETURNS jsonb LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'preview_synthetic_wrapper';
COMMENT ON FUNCTION dp.preview_synthetic(regclass, text[], float8, float8, int, jsonb, text, jsonb, float8, float8, boolean, bigint, int, text, int) IS
    'pg_dp: runs the pipeline of dp.release_synthetic with the same arguments runs times (1 to 100) on a table the caller may read directly (not protected, or the caller owns it, is trusted or a superuser), uncharged and writing nothing; returns how often a candidate was accepted, the mean rows, the criteria''s mean values and the mean total-variation distance of the copies'' 1-way and 2-way tables from the table''s. For choosing settings on public look-alike data before paying for a release';
GRANT EXECUTE ON FUNCTION dp.preview_synthetic(regclass, text[], float8, float8, int, jsonb, text, jsonb, float8, float8, boolean, bigint, int, text, int) TO PUBLIC;

-- a declared domain's filter runs once per group, in the DP level's HAVING
CREATE FUNCTION dp.per_group(bool) RETURNS bool LANGUAGE c VOLATILE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_per_group';
COMMENT ON FUNCTION dp.per_group(bool) IS 'pg_dp internal: returns its argument; volatile, so that a condition on the GROUP BY keys that pg_dp''s rewrite places in a DP level''s HAVING stays there and runs once per group';
GRANT EXECUTE ON FUNCTION dp.per_group(bool) TO PUBLIC;

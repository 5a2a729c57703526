-- pg_dp: privacy budgets and the ledger of releases (hand-written; loaded after pg_dp.sql).
--
-- Every release is paid before the query reads any data, by the ledger worker, in a transaction of
-- its own: nothing the caller does afterwards (ROLLBACK, an error, a cancel, a crash) undoes it.
-- Amounts are numeric, never float sums.

CREATE FUNCTION dp.check_preloaded() RETURNS void
    LANGUAGE c AS 'MODULE_PATHNAME', 'dp_check_preloaded';
COMMENT ON FUNCTION dp.check_preloaded() IS 'pg_dp internal: fails unless pg_dp was loaded by shared_preload_libraries';
REVOKE EXECUTE ON FUNCTION dp.check_preloaded() FROM PUBLIC;
SELECT dp.check_preloaded();

-- dp_admin: may grant budgets and read every receipt. Roles are cluster-wide, so the role survives
-- DROP EXTENSION and is shared by every database that installs pg_dp.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'dp_admin') THEN
        CREATE ROLE dp_admin NOLOGIN;
    END IF;
END
$$;

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

-- Roles are identified by a pg_dp identity, a random uuid kept as the role's shared security label of
-- provider pg_dp_role (pg_shseclabel, src/catalog/identity.rs): it follows renames, is dumped and
-- restored with the role by pg_dumpall, goes away with DROP ROLE, and so never passes to a new role
-- that gets a dropped role's OID, in any database.
CREATE TABLE dp.role_budget (
    epsilon_granted       dp.budget_amount NOT NULL DEFAULT 0,
    epsilon_spent         dp.budget_amount NOT NULL DEFAULT 0,
    delta_granted         dp.delta_grant NOT NULL DEFAULT 0,
    delta_spent           dp.budget_amount NOT NULL DEFAULT 0,
    max_epsilon_per_query dp.epsilon_cap,
    updated_at            timestamptz NOT NULL DEFAULT pg_catalog.now(),
    privacy_level         text,
    -- a budget period: the granted amounts are renewed every period; what each period spent moves to
    -- the lifetime totals (NULL: one budget for ever)
    period                dp.budget_period,
    period_start          timestamptz,
    lifetime_epsilon_spent numeric NOT NULL DEFAULT 0,
    lifetime_delta_spent  numeric NOT NULL DEFAULT 0,
    -- the pg_dp identity of the role (dp.role_identities)
    role_uid              uuid PRIMARY KEY,
    -- the role's name at the last grant, for a budget no role carries any more
    role_name             name NOT NULL
);
COMMENT ON TABLE dp.role_budget IS 'pg_dp: privacy budget of each role in this database (exact numeric), by the role''s pg_dp identity (role_uid); read it through dp.budgets';

CREATE TABLE dp.release_log (
    id            bigserial PRIMARY KEY,
    charged_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    role          oid NOT NULL,
    role_name     name NOT NULL,
    database_user name NOT NULL,
    query_id      bigint,
    -- NULL when the text is kept once for its fingerprint in dp.query_text
    query_text    text,
    aggregate     text NOT NULL,
    mechanism     text NOT NULL,
    sensitivity   float8 NOT NULL,
    noise_scale   float8 NOT NULL,
    -- 0 for a reused release (details.reused names the release) and a forfeit of nothing (details.forfeit)
    epsilon       numeric NOT NULL CONSTRAINT release_log_epsilon_check CHECK (epsilon > 0 OR (epsilon = 0 AND (details ? 'reused' OR details ? 'forfeit'))),
    delta         numeric NOT NULL DEFAULT 0 CHECK (delta >= 0),
    details       jsonb NOT NULL DEFAULT '{}',
    -- the pg_dp identity of the role charged (role above is its OID then, in the cluster of the charge)
    role_uid      uuid
);
CREATE INDEX ON dp.release_log (role_uid, charged_at);
COMMENT ON SEQUENCE dp.release_log_id_seq IS 'pg_dp: numbers the receipts in dp.release_log';
COMMENT ON TABLE dp.release_log IS 'pg_dp: one row per paid release (the privacy receipts); read it through dp.ledger';

-- The text of each query fingerprint, kept once (the first text seen; the request to the ledger worker
-- caps it at a few kilobytes): a receipt of the same text stores none of its own, one with other
-- constants keeps its own.
CREATE TABLE dp.query_text (
    query_id   bigint PRIMARY KEY,
    query_text text NOT NULL,
    first_seen timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE dp.query_text IS 'pg_dp: the text of each query fingerprint of the receipts, kept once (the first text seen); read it through dp.ledger';

-- pg_dump keeps budgets and receipts
SELECT pg_catalog.pg_extension_config_dump('dp.role_budget', '');
SELECT pg_catalog.pg_extension_config_dump('dp.release_log', '');
SELECT pg_catalog.pg_extension_config_dump('dp.release_log_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dp.query_text', '');

REVOKE ALL ON dp.role_budget, dp.release_log, dp.release_log_id_seq FROM PUBLIC;

-- The start of the period that contains now, for a budget period that started at `start`.
CREATE FUNCTION dp.current_period_start(start timestamptz, period interval) RETURNS timestamptz
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s timestamptz := start;
BEGIN
    IF start IS NULL OR period IS NULL THEN
        RETURN start;
    END IF;
    WHILE s + period <= pg_catalog.now() LOOP
        s := s + period;
    END LOOP;
    RETURN s;
END
$$;
COMMENT ON FUNCTION dp.current_period_start(timestamptz, interval) IS 'pg_dp internal: the start of the budget period that contains now';

-- The pg_dp identity of every role that has one. Labels are readable by everyone (pg_shseclabel).
CREATE VIEW dp.role_identities AS
SELECT l.objoid::pg_catalog.regrole AS role, l.label::uuid AS role_uid
  FROM pg_catalog.pg_shseclabel l
 WHERE l.provider = 'pg_dp_role' AND l.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass;
COMMENT ON VIEW dp.role_identities IS 'pg_dp: the pg_dp identity (role_uid) of each role that has one, its security label of provider pg_dp_role, shared by every database; budgets and receipts belong to the identity, not to the OID';
GRANT SELECT ON dp.role_identities TO PUBLIC;

CREATE FUNCTION dp.role_uid(role regrole) RETURNS uuid
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT i.role_uid FROM dp.role_identities i WHERE i.role = role_uid.role;
$$;
COMMENT ON FUNCTION dp.role_uid(regrole) IS 'pg_dp: the pg_dp identity of a role (NULL: it has none, and so no budget)';

CREATE FUNCTION dp.ensure_role_uid(role regrole) RETURNS uuid
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

-- Admin API. SECURITY DEFINER with a pinned search_path; EXECUTE only for dp_admin (and superusers).
-- These are ordinary transactional writes: a grant counts once it commits.

-- Arguments of the admin API that must not be NULL: SQLSTATE 22004, naming the function and the argument.
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

CREATE FUNCTION dp.check_epsilon_delta(epsilon float8, delta float8) RETURNS void
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
COMMENT ON FUNCTION dp.check_epsilon_delta(float8, float8) IS 'pg_dp internal: validates an epsilon and a delta given to the admin API';

CREATE FUNCTION dp.grant_budget(role regrole, epsilon float8, delta float8 DEFAULT 0) RETURNS SETOF dp.budgets
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
COMMENT ON FUNCTION dp.grant_budget(regrole, float8, float8) IS 'pg_dp: adds epsilon and delta to a role''s privacy budget in this database, giving the role a pg_dp identity first if it has none (dp_admin)';

CREATE FUNCTION dp.set_budget(role regrole, epsilon float8, delta float8 DEFAULT 0,
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
COMMENT ON FUNCTION dp.set_budget(regrole, float8, float8, float8) IS 'pg_dp: sets a role''s granted epsilon and delta (spending so far is kept) and its per-query epsilon cap (dp_admin)';

CREATE FUNCTION dp.revoke_budget(role regrole) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT dp.refuse_nulls('dp.revoke_budget', ARRAY['role'], ARRAY[role IS NULL]);
    -- nothing remains, and what was spent stays: a later grant adds to it, never erases it
    UPDATE dp.role_budget b
       SET epsilon_granted = b.epsilon_spent, delta_granted = b.delta_spent, updated_at = pg_catalog.now()
     WHERE b.role_uid = dp.role_uid(revoke_budget.role);
$$;
COMMENT ON FUNCTION dp.revoke_budget(regrole) IS 'pg_dp: takes back what remains of a role''s budget (granted becomes spent); the spending and the receipts stay, so a later grant adds to them (dp_admin)';

CREATE FUNCTION dp.set_budget_period(role regrole, period interval) RETURNS SETOF dp.budgets
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
COMMENT ON FUNCTION dp.set_budget_period(regrole, interval) IS 'pg_dp: renews a role''s granted epsilon and delta every period (at least 1 hour; NULL: no period); the current period starts now and keeps what was spent so far, so the first renewal comes one period from now; at each renewal spending moves to lifetime totals, never erased (dp_admin)';
REVOKE EXECUTE ON FUNCTION dp.set_budget_period(regrole, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.set_budget_period(regrole, interval) TO dp_admin;

-- A role restored without its pg_dp identity (pg_dumpall --no-security-labels, a role created by
-- hand) takes back the budgets and receipts of its old identity (dp.budgets.role_uid).
CREATE FUNCTION dp.adopt_budget(role regrole, role_uid uuid) RETURNS SETOF dp.budgets
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
COMMENT ON FUNCTION dp.adopt_budget(regrole, uuid) IS 'pg_dp: gives a role without a pg_dp identity the identity role_uid (dp.budgets.role_uid) of a budget no role carries, with its budgets and receipts in every database (a role restored without its security label); refused when the role has another identity or another role has this one (dp_admin)';
REVOKE EXECUTE ON FUNCTION dp.adopt_budget(regrole, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.adopt_budget(regrole, uuid) TO dp_admin;

-- Retention and export, for auditors.
CREATE FUNCTION dp.purge_receipts(older_than interval) RETURNS bigint
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
COMMENT ON FUNCTION dp.purge_receipts(interval) IS 'pg_dp: deletes the receipts charged longer ago than older_than, and the query texts no receipt uses, and returns how many receipts went; budgets keep what was spent (dp_admin)';
REVOKE EXECUTE ON FUNCTION dp.purge_receipts(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.purge_receipts(interval) TO dp_admin;

CREATE FUNCTION dp.export_ledger(since timestamptz DEFAULT '-infinity', until timestamptz DEFAULT 'infinity') RETURNS SETOF jsonb
LANGUAGE sql STABLE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.to_jsonb(l) FROM dp.ledger l
     WHERE l.charged_at >= coalesce(since, '-infinity') AND l.charged_at < coalesce(until, 'infinity') ORDER BY l.id;
$$;
REVOKE EXECUTE ON FUNCTION dp.export_ledger(timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.export_ledger(timestamptz, timestamptz) TO dp_admin;
COMMENT ON FUNCTION dp.export_ledger(timestamptz, timestamptz) IS 'pg_dp: the receipts charged in [since, until) (a NULL bound: unbounded), one JSON object each, for audits (reads dp.ledger with the caller''s rights: superusers and dp_admin); for CSV, COPY (SELECT * FROM dp.ledger) TO STDOUT WITH CSV HEADER';

-- Budgets of dropped roles (DROP ROLE moves them here, src/execution/lifecycle.rs): a new role that gets the
-- same OID does not inherit them, and what was granted and spent stays on record.
CREATE TABLE dp.dropped_role_budget (
    role           oid NOT NULL,
    role_name      name NOT NULL,
    dropped_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
    epsilon_granted numeric NOT NULL,
    epsilon_spent  numeric NOT NULL,
    delta_granted  numeric NOT NULL,
    delta_spent    numeric NOT NULL,
    lifetime_epsilon_spent numeric NOT NULL,
    lifetime_delta_spent numeric NOT NULL,
    role_uid       uuid
);
COMMENT ON TABLE dp.dropped_role_budget IS 'pg_dp: the budgets of dropped roles, archived by DROP ROLE in this database, with the role''s OID, name and pg_dp identity then (superusers and dp_admin)';
SELECT pg_catalog.pg_extension_config_dump('dp.dropped_role_budget', '');
GRANT SELECT ON dp.dropped_role_budget TO dp_admin;

CREATE FUNCTION dp.archive_role_budget(role oid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH gone AS (DELETE FROM dp.role_budget b WHERE b.role_uid = dp.role_uid(archive_role_budget.role) RETURNING b.*)
    INSERT INTO dp.dropped_role_budget (role, role_name, epsilon_granted, epsilon_spent, delta_granted, delta_spent,
                                        lifetime_epsilon_spent, lifetime_delta_spent, role_uid)
    SELECT archive_role_budget.role, coalesce((SELECT rolname FROM pg_catalog.pg_roles r WHERE r.oid = archive_role_budget.role), g.role_name),
           g.epsilon_granted, g.epsilon_spent, g.delta_granted, g.delta_spent,
           g.lifetime_epsilon_spent + g.epsilon_spent, g.lifetime_delta_spent + g.delta_spent, g.role_uid
      FROM gone g;
$$;
COMMENT ON FUNCTION dp.archive_role_budget(oid) IS 'pg_dp internal: moves the budget of a role being dropped to dp.dropped_role_budget';
REVOKE EXECUTE ON FUNCTION dp.archive_role_budget(oid) FROM PUBLIC;

-- Named privacy levels (core/src/levels.rs holds the mapping).
CREATE FUNCTION dp.privacy_level_epsilon(level text) RETURNS float8
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_privacy_level_epsilon';
COMMENT ON FUNCTION dp.privacy_level_epsilon(text) IS 'pg_dp: the epsilon per query of a named privacy level (very_high, high, medium, low, very_low)';

CREATE FUNCTION dp.privacy_level_names() RETURNS text[]
    LANGUAGE c IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'dp_privacy_level_names';
COMMENT ON FUNCTION dp.privacy_level_names() IS 'pg_dp: the named privacy levels, from the most private to the least';

CREATE VIEW dp.privacy_levels AS
SELECT l.level, dp.privacy_level_epsilon(l.level) AS epsilon_per_query, l.level = pg_catalog.current_setting('dp.privacy_level') AS current
  FROM pg_catalog.unnest(dp.privacy_level_names()) WITH ORDINALITY AS l(level, n)
 ORDER BY l.n;
COMMENT ON VIEW dp.privacy_levels IS 'pg_dp: the named privacy levels, their epsilon per query, and which one dp.privacy_level selects in this session';
GRANT SELECT ON dp.privacy_levels TO PUBLIC;

CREATE FUNCTION dp.invalidate_plans() RETURNS void
    LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'dp_invalidate_plans';
COMMENT ON FUNCTION dp.invalidate_plans() IS 'pg_dp internal: when the transaction commits, every session plans its cached statements with DP aggregates again (they read the pinned privacy level again); run by dp.pin_privacy_level';
REVOKE EXECUTE ON FUNCTION dp.invalidate_plans() FROM PUBLIC;

CREATE FUNCTION dp.pin_privacy_level(role regrole, level text) RETURNS SETOF dp.budgets
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
-- rows that pay and one insert of every receipt. Nothing here is called by users.

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

REVOKE EXECUTE ON FUNCTION dp.check_epsilon_delta(float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.grant_budget(regrole, float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.set_budget(regrole, float8, float8, float8) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dp.revoke_budget(regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp.grant_budget(regrole, float8, float8) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.set_budget(regrole, float8, float8, float8) TO dp_admin;
GRANT EXECUTE ON FUNCTION dp.revoke_budget(regrole) TO dp_admin;

-- What a query would cost, without running it (src/budget/preview.rs).
CREATE FUNCTION dp.preview(query text, OUT aggregate text, OUT mechanism text, OUT epsilon numeric, OUT delta numeric,
                           OUT sensitivity float8, OUT noise_scale float8, OUT details jsonb)
    RETURNS SETOF record LANGUAGE c VOLATILE ROWS 10 AS 'MODULE_PATHNAME', 'dp_preview';
COMMENT ON FUNCTION dp.preview(text) IS 'pg_dp: the receipts a DP query would write (aggregate, mechanism, epsilon, delta, sensitivity, noise scale, details), from the query, the catalog and the session settings alone: it is checked like any query, never planned nor run, and charges nothing; sum(epsilon) is its cost. Parameters must be literals';

-- What pg_dp admits below a DP aggregate, for analysts (src/query/total.rs, FAILURE_MODES; refusal
-- hints point here).
CREATE FUNCTION dp.grammar(OUT construct text, OUT could_fail_by text, OUT why_it_cannot text)
    RETURNS SETOF record LANGUAGE c IMMUTABLE ROWS 20 AS 'MODULE_PATHNAME', 'dp_grammar';
COMMENT ON FUNCTION dp.grammar() IS 'pg_dp: every kind of expression pg_dp admits below a DP aggregate, how it could fail at run time, and why it cannot for any stored value (or the guard that refuses the forms where it could); anything not listed is refused';
CREATE VIEW dp.grammar AS SELECT * FROM dp.grammar();
COMMENT ON VIEW dp.grammar IS 'pg_dp: what pg_dp admits below a DP aggregate (dp.grammar()); the README''s section "Aggregates" gives the rules for whole queries';
GRANT SELECT ON dp.grammar TO PUBLIC;

-- The releases this session received (src/execution/recent.rs).
CREATE FUNCTION dp.last_releases(n int DEFAULT 10, OUT released_at timestamptz, OUT aggregate text, OUT value float8,
                                 OUT epsilon float8, OUT delta float8, OUT mechanism text, OUT noise_scale float8,
                                 OUT interval_95 float8, OUT lower float8, OUT upper float8)
    RETURNS SETOF record LANGUAGE c VOLATILE ROWS 10 AS 'MODULE_PATHNAME', 'dp_last_releases';
COMMENT ON FUNCTION dp.last_releases(int) IS 'pg_dp: the n (at most 100) newest releases this session received, newest first: value (as float8), epsilon, delta, mechanism, noise scale and a 95% interval half-width of the noise (for dp_avg, dp_variance and dp_stddev an approximate one of the result, from its own noisy statistics; for smooth-sensitivity quantiles at the largest possible scale; NULL for the exponential mechanism), and for a call without bounds the bounds it chose (automatic bounds; NULL otherwise). Releases of groups that HAVING dropped are not listed; a level''s releases are listed when it ends, by aggregate and value, with one time';

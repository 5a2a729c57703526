-- Error bars a chart can plot: dp_interval_low(<pg_dp aggregate call>) and dp_interval_high(…), the 95%
-- interval of that very release (query/intervals.rs rewrites them before planning).

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

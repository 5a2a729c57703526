//! Receipts: what one admitted aggregate call costs at its parameters (one per grouping set and
//! group a unit may reach), validated before anything runs. The charge debits them, `dp.preview`
//! shows them, the release cache keys on them.
use crate::catalog::functions::Kind;
use crate::pg::error::OrRaise;
use crate::query::params::Paid;
use pg_dp_core::accounting::charge::{charged_decimal, ReleaseRecord};
use pg_dp_core::mechanisms::accum::{Acc, Spec};
use pg_dp_core::description::{DpAggregate, DpLevel, KeyRelease, ParamSource};
use pg_dp_core::mechanisms::ReleaseInfo;
use pg_dp_core::mechanisms::partition::Selection;
use pg_dp_core::mechanisms::autobounds::{AutoBoundsSpec, AUTO_BOUNDS_MECHANISM, AUTO_BOUNDS_SHARE};
use pg_dp_core::{DpError, DpResult};

/// The receipts one admitted aggregate call makes at these parameters (one per grouping set and
/// group a unit may reach), validating every parameter first: what the charge debits, and what
/// `dp.preview` shows.
pub(crate) fn receipts_of(level: &DpLevel, described: &DpAggregate, kind: Kind, params: Paid) -> Vec<ReleaseRecord> {
    let func = kind.func();
    let (info, details) = match params {
        Paid::Sum(p) => {
            let spec = Acc::new(p).or_raise(func).spec;
            (spec.describe(), spec.details())
        }
        Paid::Quantile(q) => {
            let spec = q.spec().or_raise(func);
            (spec.describe(), spec.details())
        }
        Paid::AvgPublicCount { params, count } => {
            let Spec::Avg(avg) = Acc::new(params).or_raise(func).spec else { unreachable!("dp_avg parameters") };
            let spec = avg.with_public_count(count).or_raise(func);
            (spec.describe(), spec.details())
        }
        Paid::Auto { kind, p, epsilon } => crate::budget::receipts::automatic_bounds_receipt(kind, f64::from_bits(p), f64::from_bits(epsilon)).or_raise(func),
        Paid::Selection { epsilon, delta } => {
            let s = Selection::new(f64::from_bits(epsilon), f64::from_bits(delta)).or_raise(func);
            let info = ReleaseInfo { mechanism: "partition_selection", epsilon: s.epsilon, delta: s.delta, sensitivity: 1.0, scale: 0.0, count_scale: None, interval95: None, count_interval95: None };
            (info, s.details())
        }
    };
    // every receipt states the 95% half-width of its noise (docs/privacy/intervals.md) and the
    // parameters it was paid at
    let mut v: serde_json::Value = serde_json::from_str(&details).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(o) = v.as_object_mut() {
        if let serde_json::Value::Object(intervals) = info.intervals_json() {
            o.extend(intervals);
        }
        o.insert("parameters".into(), parameters_json(params));
        add_level(o, level);
        if described.params.contains(&ParamSource::Declared) {
            o.insert("bounds".into(), "declared for the column (dp.set_bounds)".into());
        }
        if described.params.contains(&ParamSource::PublicCount) {
            o.insert("count_declared".into(), "public row count of the table (dp.set_public_count)".into());
        }
    }
    let details = v.to_string();
    // the call as the query wrote it (a count over privacy units runs as a sum of per-unit counts)
    let name = described.function.clone();
    let delta = if info.delta > 0.0 { charged_decimal(info.delta) } else { "0".into() };
    (0..level.releases_per_aggregate())
        .map(|_| ReleaseRecord {
            aggregate: name.clone(),
            mechanism: info.mechanism.to_string(),
            sensitivity: info.sensitivity,
            noise_scale: info.scale,
            epsilon: charged_decimal(info.epsilon),
            delta: delta.clone(),
            details: details.clone(),
        })
        .collect()
}

/// The parameters of a release as JSON, for its receipt: bounds, p, ε, δ, a public count.
fn parameters_json(params: Paid) -> serde_json::Value {
    let f = f64::from_bits;
    match params {
        Paid::Sum(p) | Paid::AvgPublicCount { params: p, .. } => {
            let mut v = match p.kind {
                0 => serde_json::json!({ "epsilon": f(p.epsilon) }),
                1 => serde_json::json!({ "lower": p.lower as i64, "upper": p.upper as i64, "epsilon": f(p.epsilon) }),
                _ => serde_json::json!({ "lower": f(p.lower), "upper": f(p.upper), "epsilon": f(p.epsilon) }),
            };
            if let (Paid::AvgPublicCount { count, .. }, Some(o)) = (params, v.as_object_mut()) {
                o.insert("public_count".into(), count.into());
            }
            v
        }
        Paid::Quantile(q) => serde_json::json!({
            "p": f(q.p), "lower": f(q.lower), "upper": f(q.upper), "epsilon": f(q.epsilon), "delta": f(q.delta)
        }),
        Paid::Auto { p, epsilon, .. } => serde_json::json!({ "p": f(p), "epsilon": f(epsilon), "bounds": "automatic" }),
        Paid::Selection { epsilon, delta } => serde_json::json!({ "epsilon": f(epsilon), "delta": f(delta) }),
    }
}

/// Receipt details with one more JSON value.
pub fn with_value(details: &str, key: &str, value: serde_json::Value) -> String {
    let mut v: serde_json::Value = serde_json::from_str(details).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(o) = v.as_object_mut() {
        o.insert(key.into(), value);
    }
    v.to_string()
}

/// Adds to a receipt's details the level's source table, privacy unit and the way its GROUP BY keys
/// are released.
fn add_level(o: &mut serde_json::Map<String, serde_json::Value>, level: &DpLevel) {
    o.insert("source".into(), level.source.name.clone().into());
    // protected tables joined on the privacy unit, with the condition that links each
    let joined: Vec<serde_json::Value> = level
        .joins
        .iter()
        .filter(|j| j.relation.protected)
        .map(|j| serde_json::json!({ "table": j.relation.name, "on": j.key.join(" AND ") }))
        .collect();
    if !joined.is_empty() {
        o.insert("joined_on_unit".into(), joined.into());
    }
    if level.exact_query.is_some() {
        o.insert("distributed".into(), "Citus: exact partial aggregation on the workers, noise and charge on the coordinator".into());
    }
    if let Some(u) = &level.unit {
        o.insert("privacy_unit".into(), serde_json::to_value(u).unwrap_or_default());
        o.insert("groups_per_unit".into(), level.groups_per_unit().into());
    }
    match &level.keys {
        KeyRelease::AsStored => {}
        KeyRelease::PublicDomain(d) => {
            o.insert("group_keys".into(), serde_json::json!({ "public_domain": d }));
        }
        KeyRelease::Selected { epsilon, delta } => {
            o.insert("group_keys".into(), serde_json::json!({ "partition_selection": { "epsilon": epsilon, "delta": delta } }));
        }
    }
}

/// The receipt of a call with automatic bounds, known before the query runs: the caller's ε, and
/// the sensitivity (1) and noise scale of the bounds' noisy histogram; those of the release itself
/// follow from the bounds chosen at run time (`dp.last_releases` shows them).
pub fn automatic_bounds_receipt(kind: Kind, p: f64, epsilon: f64) -> DpResult<(ReleaseInfo, String)> {
    let spec = AutoBoundsSpec::new(epsilon)?;
    // both shares must be valid ε themselves, or the release would fail after the charge
    let (e_bounds, _) = spec.split();
    if e_bounds < pg_dp_core::params::EPSILON_MIN {
        return Err(DpError::invalid("epsilon", "at least 5e-9 with automatic bounds (a fifth of it chooses the bounds)", pg_dp_core::params::fmt_f64(epsilon)));
    }
    if kind == Kind::Percentile {
        pg_dp_core::mechanisms::smooth::check_p(p)?;
    }
    let (e_bounds, e_release) = spec.split();
    let info = ReleaseInfo {
        mechanism: AUTO_BOUNDS_MECHANISM,
        epsilon: spec.epsilon,
        delta: 0.0,
        sensitivity: 1.0,
        scale: 1.0 / e_bounds,
        count_scale: None,
        interval95: None,
        count_interval95: None,
    };
    let details = serde_json::json!({
        "bounds": "automatic: power-of-two bounds chosen from a noisy histogram of binary magnitudes",
        "bounds_share": AUTO_BOUNDS_SHARE,
        "bounds_epsilon": e_bounds,
        "release_epsilon": e_release,
        "sensitivity_and_scale": "of the noisy histogram that chooses the bounds; the release's own follow from the chosen bounds (dp.last_releases)",
        "release": match kind { Kind::Avg => "dp_avg at the chosen bounds", Kind::Median | Kind::Percentile => "exponential-mechanism quantile at the chosen bounds", _ => "dp_sum at the chosen bounds" },
    });
    Ok((info, details.to_string()))
}

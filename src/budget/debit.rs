//! The debit of a batch of plain charges, run by the ledger worker (ledger.rs) inside its transaction.
//!
//! A few statements per batch, kept prepared for the worker's life: the batch's budget rows, locked in
//! one statement (in the order of their identities, so that two lockers never wait on each other);
//! one update of the rows that pay; one insert of every receipt of the batch, which also keeps each
//! fingerprint's query text once. The roles' identities and names come from the catalog. Each role's
//! requests are decided in order by `pg_dp_core::accounting::debit::decide`, over PostgreSQL's
//! `numeric`: amounts are exact decimals, added and compared by the database's own functions.
//!
//! The update and the insert list their rows as `VALUES` with one parameter per field (one kept
//! statement per number of rows, up to [`CHUNK`] rows; a larger batch takes several): the executor
//! starts a `VALUES` list faster than it unnests one array per column. The statements run under the
//! worker's `search_path = pg_catalog, pg_temp` and generic plans (ledger.rs), so that their operators
//! are PostgreSQL's and their plans are made once.
use crate::catalog::identity;
use pg_dp_core::accounting::charge::{ChargeOutcome, ChargeRequest, ReleaseRecord};
use pg_dp_core::accounting::debit::{decide, trimmed_decimal, Budget, Decision, Request};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiError, SpiTupleTable};
use pgrx::{AnyNumeric, PgBuiltInOids, PgOid};
use std::cell::RefCell;
use std::collections::HashMap;

/// Most rows in one kept statement.
pub const CHUNK: usize = 32;

/// The budget rows of the batch's identities, locked in the order of their identities (a batch of
/// one role, the common case, needs no sort); whether a row's budget period has ended (renewed by
/// `dp.locked_budget` before it is decided on).
fn budgets_sql(several: bool) -> String {
    format!(
        "SELECT b.role_uid::text, b.epsilon_granted - b.epsilon_spent, b.delta_granted - b.delta_spent, \
                b.max_epsilon_per_query::numeric, b.privacy_level, \
                CASE WHEN b.privacy_level IS NOT NULL THEN dp.privacy_level_epsilon(b.privacy_level)::numeric END, \
                b.period IS NOT NULL AND now() >= b.period_start + b.period \
           FROM dp.role_budget b WHERE {} FOR UPDATE",
        if several { "b.role_uid = ANY ($1::text[]::uuid[]) ORDER BY b.role_uid" } else { "b.role_uid = $1::uuid" }
    )
}

/// The update of the rows that pay, for `n` of them: the ε and δ granted, the role's current name.
fn spend_sql(n: usize) -> String {
    let rows: Vec<String> =
        (0..n).map(|i| format!("(${}::uuid, ${}::numeric, ${}::numeric, ${}::name)", 4 * i + 1, 4 * i + 2, 4 * i + 3, 4 * i + 4)).collect();
    format!(
        "UPDATE dp.role_budget b \
            SET epsilon_spent = b.epsilon_spent + u.e, delta_spent = b.delta_spent + u.d, role_name = coalesce(u.n, b.role_name) \
           FROM (VALUES {}) AS u(uid, e, d, n) \
          WHERE b.role_uid = u.uid",
        rows.join(", ")
    )
}

/// Fields of a receipt, in the order of the parameters of `receipts_sql`.
const RECEIPT_FIELDS: usize = 13;

/// The insert of `n` receipts, in order. It keeps each fingerprint's text once (the first text seen:
/// `$1`, `$2` are the query ids and texts of the receipts' requests); a receipt's own text is NULL when
/// it is the text kept for its fingerprint, and kept on the receipt otherwise (other constants).
fn receipts_sql(n: usize) -> String {
    let rows: Vec<String> = (0..n)
        .map(|i| {
            let p = |k: usize| 3 + RECEIPT_FIELDS * i + k;
            format!(
                "(${}::oid, ${}::name, ${}::name, ${}::int8, ${}::text, ${}::text, ${}::text, ${}::float8, ${}::float8, \
                  ${}::numeric, ${}::numeric, ${}::jsonb, ${}::uuid)",
                p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7), p(8), p(9), p(10), p(11), p(12)
            )
        })
        .collect();
    format!(
        "WITH kept AS ( \
             INSERT INTO dp.query_text AS q (query_id, query_text) \
             SELECT DISTINCT ON (u.q) u.q, u.t FROM unnest($1::int8[], $2::text[]) WITH ORDINALITY AS u(q, t, i) \
              WHERE u.q IS NOT NULL AND u.q <> 0 ORDER BY u.q, u.i \
             ON CONFLICT ON CONSTRAINT query_text_pkey DO NOTHING \
             RETURNING q.query_id, q.query_text) \
         INSERT INTO dp.release_log (role, role_name, database_user, query_id, query_text, aggregate, mechanism, \
                                     sensitivity, noise_scale, epsilon, delta, details, role_uid) \
         SELECT v.r, v.rn, v.du, v.q, \
                CASE WHEN coalesce((SELECT k.query_text FROM kept k WHERE k.query_id = v.q), \
                                   (SELECT t.query_text FROM dp.query_text t WHERE t.query_id = v.q)) = v.t \
                     THEN NULL ELSE v.t END, \
                v.a, v.m, v.s, v.c, v.e, v.d, v.x, v.uid \
           FROM (VALUES {}) AS v(r, rn, du, q, t, a, m, s, c, e, d, x, uid)",
        rows.join(", ")
    )
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Statement {
    /// For one role, or several.
    Budgets(bool),
    Spend(usize),
    Receipts(usize),
}

impl Statement {
    fn sql(self) -> String {
        match self {
            Statement::Budgets(several) => budgets_sql(several),
            Statement::Spend(n) => spend_sql(n),
            Statement::Receipts(n) => receipts_sql(n),
        }
    }

    fn types(self) -> Vec<PgOid> {
        use PgBuiltInOids as B;
        let t = |o| PgOid::BuiltIn(o);
        match self {
            Statement::Budgets(several) => vec![t(if several { B::TEXTARRAYOID } else { B::TEXTOID })],
            Statement::Spend(n) => vec![t(B::TEXTOID); 4 * n],
            Statement::Receipts(n) => {
                let row = [
                    B::OIDOID,
                    B::TEXTOID,
                    B::TEXTOID,
                    B::INT8OID,
                    B::TEXTOID,
                    B::TEXTOID,
                    B::TEXTOID,
                    B::FLOAT8OID,
                    B::FLOAT8OID,
                    B::TEXTOID,
                    B::TEXTOID,
                    B::TEXTOID,
                    B::TEXTOID,
                ];
                let mut v = vec![t(B::INT8ARRAYOID), t(B::TEXTARRAYOID)];
                v.extend((0..n).flat_map(|_| row.iter().map(|&o| t(o))));
                v
            }
        }
    }
}

thread_local! {
    /// The statements, prepared once for the worker's life (dropped after an error, prepared again).
    static PLANS: RefCell<HashMap<Statement, OwnedPreparedStatement>> = RefCell::new(HashMap::new());
}

/// Drops the kept statements (after an error: the next batch prepares them again).
pub fn forget_plans() {
    PLANS.with(|p| p.borrow_mut().clear());
}

/// Runs statement `s` with `args`, preparing it first if it is not kept; `read` sees its rows.
fn run<R>(
    c: &mut SpiClient<'_>,
    s: Statement,
    args: &[DatumWithOid<'_>],
    read: impl FnOnce(SpiTupleTable<'_>) -> Result<R, SpiError>,
) -> Result<R, SpiError> {
    if PLANS.with(|p| !p.borrow().contains_key(&s)) {
        let plan = c.prepare_mut(s.sql().as_str(), &s.types())?.keep();
        PLANS.with(|p| p.borrow_mut().insert(s, plan));
    }
    PLANS.with(|p| {
        let plans = p.borrow();
        let t = c.update(plans.get(&s).expect("prepared above"), None, args)?;
        read(t)
    })
}

fn numeric(s: &str) -> AnyNumeric {
    AnyNumeric::try_from(s).unwrap_or_else(|e| error!("pg_dp ledger: an amount that is not a decimal ({s:?}): {e}"))
}

/// One role of the batch: its identity and name.
struct Role {
    oid: pg_sys::Oid,
    uid: Option<String>,
    name: Option<String>,
}

/// The requests decided against one budget row, in order (indexes into the batch): those of one
/// identity, whichever roles carry it (two roles carry one only if labelled alike, which the label
/// hook refuses but two racing labels could do), or of one role without an identity.
struct Payer {
    uid: Option<String>,
    /// The first of its roles (`roles` index): its name updates the row, a role without an identity
    /// is given one.
    role: usize,
    requests: Vec<usize>,
}

/// Debits `reqs` (plain charges: releases to pay, none reused, not a forfeit) in the worker's
/// current transaction: one outcome per request, in order. Raises an error (the caller's
/// subtransaction rolls back) if a statement fails.
pub fn debit_batch(reqs: &[&ChargeRequest]) -> Vec<ChargeOutcome> {
    // the roles, with their identities and names (`role_of[i]`: request i's); the payers, in the
    // order of their first request
    let mut roles: Vec<Role> = Vec::new();
    let mut role_of: Vec<usize> = Vec::with_capacity(reqs.len());
    let mut payers: Vec<Payer> = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let oid = pg_sys::Oid::from(r.role);
        let k = roles.iter().position(|x| x.oid == oid).unwrap_or_else(|| {
            roles.push(unsafe { Role { oid, uid: identity::identity_of(oid), name: identity::existing_role_name(oid) } });
            roles.len() - 1
        });
        role_of.push(k);
        let uid = roles[k].uid.clone();
        match payers.iter_mut().find(|p| if uid.is_some() { p.uid == uid } else { p.uid.is_none() && p.role == k }) {
            Some(p) => p.requests.push(i),
            None => payers.push(Payer { uid, role: k, requests: vec![i] }),
        }
    }
    let zero = AnyNumeric::from(0);
    let asked: Vec<Request<AnyNumeric>> = reqs
        .iter()
        .map(|r| Request {
            epsilon: r.releases.iter().fold(zero.clone(), |s, x| s + numeric(&x.epsilon)),
            delta: r.releases.iter().fold(zero.clone(), |s, x| s + numeric(&x.delta)),
            unlimited: r.unlimited,
        })
        .collect();
    let r = Spi::connect_mut(|c| -> Result<Vec<ChargeOutcome>, SpiError> {
        // the budget rows, locked (renewed first where a period has ended)
        let uids: Vec<String> = payers.iter().filter_map(|p| p.uid.clone()).collect();
        let mut budgets = locked_budgets(c, &uids)?;
        let ended: Vec<String> = budgets.iter().filter(|(_, _, ended)| *ended).map(|(u, _, _)| u.clone()).collect();
        if !ended.is_empty() {
            for u in ended {
                c.update("SELECT FROM dp.locked_budget($1::uuid)", None, &[u.into()])?;
            }
            budgets = locked_budgets(c, &uids)?;
        }
        // each payer's requests, in order (each budget row is in at most one payer, so it is updated once)
        let mut out: Vec<Option<ChargeOutcome>> = vec![None; reqs.len()];
        let mut granted = vec![false; reqs.len()];
        let mut spend: Vec<Option<String>> = Vec::new();
        for payer in &payers {
            let budget = payer.uid.as_ref().and_then(|u| budgets.iter().find(|(b, _, _)| b == u)).map(|(_, b, _)| b);
            let mine: Vec<Request<AnyNumeric>> = payer.requests.iter().map(|&i| asked[i].clone()).collect();
            let d = decide(budget, &mine, zero.clone());
            let role = &mut roles[payer.role];
            if budget.is_some() && d.any_granted() {
                spend.extend([payer.uid.clone(), Some(d.epsilon.to_string()), Some(d.delta.to_string()), role.name.clone()]);
            }
            // receipts name the role by its identity: a role charged without a budget (a superuser, or
            // with dp.require_budget off) gets one now, unless this transaction cannot see the role yet.
            // Labels wait for this transaction from here on (the label hook takes the same lock); one
            // given since the role was read may come with a budget its requests were not decided
            // against: the batch fails, and each request is decided again alone
            if d.any_granted() && role.uid.is_none() && role.name.is_some() {
                unsafe {
                    identity::lock_labels();
                    if identity::identity_of(role.oid).is_some() {
                        error!("pg_dp ledger: role {} was given a pg_dp identity while its charge was decided", role.oid.to_u32());
                    }
                }
                role.uid = c
                    .update("SELECT dp.ensure_role_uid($1::regrole)::text", None, &[role.oid.into()])?
                    .first()
                    .get::<String>(1)?;
            }
            for (&i, decision) in payer.requests.iter().zip(d.decisions) {
                granted[i] = decision.granted();
                out[i] = Some(outcome(decision));
            }
        }
        for rows in spend.chunks(4 * CHUNK) {
            let args: Vec<DatumWithOid> = rows.iter().map(|v| v.clone().into()).collect();
            run(c, Statement::Spend(rows.len() / 4), &args, |_| Ok(()))?;
        }
        // the receipts of the granted requests, in order
        let receipts: Vec<(usize, &ReleaseRecord)> =
            (0..reqs.len()).filter(|&i| granted[i]).flat_map(|i| reqs[i].releases.iter().map(move |x| (i, x))).collect();
        for rows in receipts.chunks(CHUNK) {
            let mut args: Vec<DatumWithOid> = vec![
                rows.iter().map(|(i, _)| reqs[*i].query_id).collect::<Vec<_>>().into(),
                rows.iter().map(|(i, _)| reqs[*i].query_text.clone()).collect::<Vec<_>>().into(),
            ];
            for &(i, x) in rows {
                let (req, role) = (reqs[i], &roles[role_of[i]]);
                args.extend([
                    role.oid.into(),
                    role.name.clone().unwrap_or_else(|| req.role.to_string()).into(),
                    req.database_user.clone().into(),
                    req.query_id.into(),
                    req.query_text.clone().into(),
                    x.aggregate.clone().into(),
                    x.mechanism.clone().into(),
                    x.sensitivity.into(),
                    x.noise_scale.into(),
                    x.epsilon.clone().into(),
                    x.delta.clone().into(),
                    x.details.clone().into(),
                    role.uid.clone().into(),
                ]);
            }
            run(c, Statement::Receipts(rows.len()), &args, |_| Ok(()))?;
        }
        Ok(out.into_iter().map(|o| o.expect("every request decided")).collect())
    });
    r.unwrap_or_else(|e| error!("pg_dp ledger: {e}"))
}

/// The budget rows of `uids`, locked: (identity, budget, whether its period has ended).
fn locked_budgets(c: &mut SpiClient<'_>, uids: &[String]) -> Result<Vec<(String, Budget<AnyNumeric>, bool)>, SpiError> {
    if uids.is_empty() {
        return Ok(Vec::new());
    }
    let arg: DatumWithOid = match uids {
        [one] => one.clone().into(),
        _ => uids.to_vec().into(),
    };
    run(c, Statement::Budgets(uids.len() > 1), &[arg], |t| {
        t.into_iter()
            .map(|row| {
                let amount = |i| row.get::<AnyNumeric>(i).map(|v| v.unwrap_or_else(|| AnyNumeric::from(0)));
                let level = match (row.get::<String>(5)?, row.get::<AnyNumeric>(6)?) {
                    (Some(name), Some(eps)) => Some((name, eps)),
                    _ => None,
                };
                let budget = Budget { epsilon_left: amount(2)?, delta_left: amount(3)?, cap: row.get::<AnyNumeric>(4)?, level };
                Ok((row.get::<String>(1)?.unwrap_or_default(), budget, row.get::<bool>(7)?.unwrap_or(false)))
            })
            .collect()
    })
}

/// The answer to the backend: what the role has left, as exact decimals without trailing zeros.
fn outcome(d: Decision<AnyNumeric>) -> ChargeOutcome {
    let text = |v: &AnyNumeric| trimmed_decimal(&v.to_string());
    match d {
        Decision::Granted { left } => ChargeOutcome::Granted { epsilon_remaining: left.map(|(e, _)| text(&e)) },
        Decision::Refused { reason, left } => ChargeOutcome::Denied {
            reason,
            epsilon_remaining: left.as_ref().map(|(e, _)| text(e)),
            delta_remaining: left.as_ref().map(|(_, d)| text(d)),
        },
    }
}

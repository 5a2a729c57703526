//! The ledger's decision for one role's requests in a batch: each request, in the order it arrived,
//! against the role's budget row (locked by the caller), and what to debit in all.
//!
//! Generic over the amount: the database decides with PostgreSQL's `numeric` (exact decimals), the
//! tests with integers. A request is granted when its ε is within the role's per-query cap and its
//! pinned privacy level, and its ε and δ within what the role has left after the requests granted
//! before it; a refused request debits nothing and leaves the budget to the ones after it.
use std::fmt::Display;
use std::ops::{Add, Sub};

/// A role's budget row, as the debit reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget<A> {
    /// Granted minus spent, in the current period.
    pub epsilon_left: A,
    pub delta_left: A,
    /// The role's largest ε per query (`max_epsilon_per_query`), if any.
    pub cap: Option<A>,
    /// The pinned privacy level's name and its ε per query, if any.
    pub level: Option<(String, A)>,
}

/// One request's total ε and δ (the sum of its releases), and whether it may be charged without a
/// budget row (superusers, `dp.require_budget = off`).
#[derive(Debug, Clone, PartialEq)]
pub struct Request<A> {
    pub epsilon: A,
    pub delta: A,
    pub unlimited: bool,
}

/// What a request gets. `left` is what the role has left after it (ε, δ); `None` when it has no
/// budget row.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<A> {
    Granted { left: Option<(A, A)> },
    /// `reason`: `cap:<ε>`, `level:<name>:<ε>`, `exhausted` or `no budget` (the backend words the
    /// refusal from it).
    Refused { reason: String, left: Option<(A, A)> },
}

impl<A> Decision<A> {
    pub fn granted(&self) -> bool {
        matches!(self, Decision::Granted { .. })
    }
}

/// One role's part of a batch: a decision per request, in order, and the totals to debit from its
/// budget row (zero when nothing was granted, or when it has no row).
#[derive(Debug, Clone, PartialEq)]
pub struct RoleDebit<A> {
    pub decisions: Vec<Decision<A>>,
    pub epsilon: A,
    pub delta: A,
}

impl<A> RoleDebit<A> {
    pub fn any_granted(&self) -> bool {
        self.decisions.iter().any(Decision::granted)
    }
}

/// Decides `requests` of one role, in order, against its `budget` (`None`: the role has no budget
/// row). `zero` is the amount type's zero.
pub fn decide<A>(budget: Option<&Budget<A>>, requests: &[Request<A>], zero: A) -> RoleDebit<A>
where
    A: Clone + PartialOrd + Add<Output = A> + Sub<Output = A> + Display,
{
    let mut debit = RoleDebit { decisions: Vec::with_capacity(requests.len()), epsilon: zero.clone(), delta: zero };
    let Some(b) = budget else {
        for r in requests {
            debit.decisions.push(if r.unlimited {
                Decision::Granted { left: None }
            } else {
                Decision::Refused { reason: "no budget".into(), left: None }
            });
        }
        return debit;
    };
    let (mut eps_left, mut delta_left) = (b.epsilon_left.clone(), b.delta_left.clone());
    for r in requests {
        let refusal = match (&b.cap, &b.level) {
            (Some(cap), _) if r.epsilon > *cap => Some(format!("cap:{cap}")),
            (_, Some((name, lvl))) if r.epsilon > *lvl => Some(format!("level:{name}:{lvl}")),
            _ if r.epsilon > eps_left || r.delta > delta_left => Some("exhausted".into()),
            _ => None,
        };
        debit.decisions.push(match refusal {
            Some(reason) => Decision::Refused { reason, left: Some((eps_left.clone(), delta_left.clone())) },
            None => {
                eps_left = eps_left - r.epsilon.clone();
                delta_left = delta_left - r.delta.clone();
                debit.epsilon = debit.epsilon.clone() + r.epsilon.clone();
                debit.delta = debit.delta.clone() + r.delta.clone();
                Decision::Granted { left: Some((eps_left.clone(), delta_left.clone())) }
            }
        });
    }
    debit
}

/// A decimal's text without trailing zeros after the point (`2.500` → `2.5`, `3.0` → `3`), as
/// PostgreSQL's `trim_scale` prints it.
pub fn trimmed_decimal(s: &str) -> String {
    if !s.contains('.') || s.contains(['e', 'E']) {
        return s.to_string();
    }
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(epsilon: i64, delta: i64) -> Request<i64> {
        Request { epsilon, delta, unlimited: false }
    }

    fn budget(eps: i64, delta: i64) -> Budget<i64> {
        Budget { epsilon_left: eps, delta_left: delta, cap: None, level: None }
    }

    #[test]
    fn requests_are_granted_in_order_until_the_budget_runs_out() {
        let d = decide(Some(&budget(10, 0)), &[req(4, 0), req(4, 0), req(4, 0), req(2, 0)], 0);
        assert_eq!(
            d.decisions,
            vec![
                Decision::Granted { left: Some((6, 0)) },
                Decision::Granted { left: Some((2, 0)) },
                Decision::Refused { reason: "exhausted".into(), left: Some((2, 0)) },
                Decision::Granted { left: Some((0, 0)) },
            ]
        );
        assert_eq!((d.epsilon, d.delta), (10, 0));
    }

    #[test]
    fn delta_is_checked_like_epsilon() {
        let d = decide(Some(&budget(10, 3)), &[req(1, 2), req(1, 2), req(1, 1)], 0);
        let granted: Vec<bool> = d.decisions.iter().map(Decision::granted).collect();
        assert_eq!(granted, vec![true, false, true]);
        assert_eq!((d.epsilon, d.delta), (2, 3));
    }

    #[test]
    fn the_cap_comes_before_the_level_and_the_level_before_the_balance() {
        let b = Budget { epsilon_left: 1, delta_left: 0, cap: Some(5), level: Some(("high".into(), 3)) };
        let d = decide(Some(&b), &[req(6, 0), req(4, 0), req(2, 0), req(1, 0)], 0);
        let reasons: Vec<String> = d
            .decisions
            .iter()
            .map(|x| match x {
                Decision::Refused { reason, .. } => reason.clone(),
                Decision::Granted { .. } => "granted".into(),
            })
            .collect();
        assert_eq!(reasons, vec!["cap:5", "level:high:3", "exhausted", "granted"]);
        assert_eq!(d.epsilon, 1);
    }

    #[test]
    fn without_a_budget_row_only_unlimited_requests_pass_and_nothing_is_debited() {
        let rs = [Request { epsilon: 5, delta: 0, unlimited: true }, req(1, 0)];
        let d = decide(None, &rs, 0);
        assert_eq!(
            d.decisions,
            vec![Decision::Granted { left: None }, Decision::Refused { reason: "no budget".into(), left: None }]
        );
        assert_eq!((d.epsilon, d.delta), (0, 0));
        // a budget row binds an unlimited request too
        let d = decide(Some(&budget(1, 0)), &rs[..1], 0);
        assert!(!d.decisions[0].granted());
    }

    #[test]
    fn the_total_never_exceeds_what_was_left() {
        // every order of a few requests: the debit is at most the balance, and equals the granted sum
        for mask in 0..4096u32 {
            let rs: Vec<Request<i64>> = (0..6).map(|k| req(((mask >> (2 * k)) & 3) as i64 + 1, 0)).collect();
            let d = decide(Some(&budget(7, 0)), &rs, 0);
            let granted: i64 = rs.iter().zip(&d.decisions).filter(|(_, x)| x.granted()).map(|(r, _)| r.epsilon).sum();
            assert!(d.epsilon <= 7 && d.epsilon == granted, "{mask}");
        }
    }

    #[test]
    fn trailing_zeros_are_trimmed() {
        assert_eq!(trimmed_decimal("2.500"), "2.5");
        assert_eq!(trimmed_decimal("3.000"), "3");
        assert_eq!(trimmed_decimal("300"), "300");
        assert_eq!(trimmed_decimal("0.000"), "0");
        assert_eq!(trimmed_decimal("-0.10"), "-0.1");
    }
}

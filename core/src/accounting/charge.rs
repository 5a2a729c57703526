//! What a charge is: the exact amount debited for a release, and the request the ledger worker runs.
//!
//! ε arrives as a float8. The ledger stores the shortest decimal that reads back as that float
//! (0.1 is charged as exactly 0.1, so ten charges of 0.1 spend exactly 1). The float itself can be a
//! hair above that decimal (the float nearest 0.1 is 0.1000000000000000055…), so the mechanism runs
//! at [`mechanism_epsilon`], the next float below, which is always below the charged decimal: the
//! shortest decimal lies within half an ulp of the float, and the next float down is a whole ulp away.
use serde::{Deserialize, Serialize};

/// The ε a mechanism actually uses for a requested (and charged) ε: the next float below it.
#[inline]
pub fn mechanism_epsilon(eps: f64) -> f64 {
    debug_assert!(eps.is_finite() && eps > 0.0);
    f64::from_bits(eps.to_bits() - 1)
}

/// The exact decimal charged for a requested ε: the shortest decimal that reads back as `eps`.
pub fn charged_decimal(eps: f64) -> String {
    // Rust's Display prints the shortest round-trip representation, without an exponent
    format!("{eps}")
}

/// One release in a charge: the content of one receipt row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseRecord {
    pub aggregate: String,
    pub mechanism: String,
    pub sensitivity: f64,
    pub noise_scale: f64,
    /// Exact decimal ε charged.
    pub epsilon: String,
    /// Exact decimal δ charged.
    pub delta: String,
    /// Mechanism details (a JSON object), e.g. β and the scale per unit of smooth sensitivity.
    #[serde(default = "empty_object")]
    pub details: String,
}

fn empty_object() -> String {
    "{}".into()
}

/// What a request asks of the ledger worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestKind {
    /// Check the budget and debit the releases (or refuse, debiting nothing).
    #[default]
    Charge,
    /// Fail closed: an error was raised inside an admitted DP level after its charge. The role's
    /// whole remaining ε and δ are debited, with one receipt saying why (no release record).
    Forfeit {
        /// SQLSTATE of the error.
        sqlstate: String,
    },
}

/// Releases served from the release cache: reused, not charged. The ledger checks that the role
/// could have bought them (a budget, the per-query cap, the pinned level) and counts the reuse,
/// once per role and execution, without a receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reuse {
    /// The execution that paid for them (its receipts' execution id).
    pub execution: String,
    /// Exact decimal ε and δ of each of their receipts.
    pub epsilons: Vec<String>,
    pub deltas: Vec<String>,
}

/// Everything the ledger worker needs to debit a query's releases in its own transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChargeRequest {
    pub role: u32,
    pub database_user: String,
    /// Charge even without a budget row (superusers, or `dp.require_budget = off`).
    pub unlimited: bool,
    pub query_id: i64,
    pub query_text: String,
    pub releases: Vec<ReleaseRecord>,
    #[serde(default)]
    pub kind: RequestKind,
    /// Releases of the query served from the release cache.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reused: Vec<Reuse>,
}

/// The worker's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ChargeOutcome {
    /// Debited and committed. Remaining budget, when the role has one.
    Granted { epsilon_remaining: Option<String> },
    /// Nothing was debited. `reason` is "exhausted", "no budget" or "cap:<max ε per query>".
    Denied { reason: String, epsilon_remaining: Option<String>, delta_remaining: Option<String> },
    /// The worker's transaction failed and was rolled back: nothing was debited.
    Failed { message: String },
}

impl ChargeRequest {
    /// Serializes the request into at most `max` bytes, shortening the query text if needed: it
    /// keeps the text's beginning and its end (where the conditions usually are; a long leading
    /// comment cannot push them out) and says in the middle how much was cut.
    pub fn to_bytes_within(&self, max: usize) -> Option<Vec<u8>> {
        let original = self.query_text.as_str();
        let mut req = self.clone();
        let mut keep = original.len();
        loop {
            let bytes = serde_json::to_vec(&req).ok()?;
            if bytes.len() <= max {
                return Some(bytes);
            }
            if keep == 0 {
                return None;
            }
            keep = keep.saturating_sub(bytes.len() - max + 64);
            req.query_text = shortened(original, keep);
        }
    }

    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        serde_json::from_slice(b).ok()
    }

    /// Total ε of the request as a decimal sum is computed by the database (numeric); this is the
    /// float sum, for messages only.
    pub fn epsilon_total_approx(&self) -> f64 {
        self.releases.iter().filter_map(|r| r.epsilon.parse::<f64>().ok()).sum()
    }
}

/// Longest decimal an answer carries exactly when it does not fit ([`ChargeOutcome::to_bytes_within`]).
pub const SHORT_DECIMAL: usize = 40;

/// `text` in about `keep` bytes: two thirds from its beginning, a marker with the number of bytes
/// cut, one third from its end (cut at character boundaries).
pub fn shortened(text: &str, keep: usize) -> String {
    if keep >= text.len() {
        return text.to_string();
    }
    let mut head = keep * 2 / 3;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (keep - keep * 2 / 3);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} […{} bytes cut…] {}", &text[..head], tail - head, &text[tail..])
}

impl ChargeOutcome {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Serializes the answer into at most `max` bytes. The amounts it carries (what the role has
    /// left, the cap or level in a refusal's reason) only word the backend's messages: when the exact
    /// decimals do not fit (a budget of 5e-324 leaves a remainder of hundreds of digits), each decimal
    /// longer than [`SHORT_DECIMAL`] characters is written as the nearest float instead.
    pub fn to_bytes_within(&self, max: usize) -> Vec<u8> {
        let exact = self.to_bytes();
        if exact.len() <= max {
            return exact;
        }
        let short = |s: &str| if s.len() > SHORT_DECIMAL { s.parse::<f64>().map_or_else(|_| s.to_string(), |v| format!("{v:e}")) } else { s.to_string() };
        let short_reason = |r: &str| match r.rsplit_once(':') {
            Some((head, amount)) => format!("{head}:{}", short(amount)),
            None => r.to_string(),
        };
        let shortened = match self {
            ChargeOutcome::Granted { epsilon_remaining } => ChargeOutcome::Granted { epsilon_remaining: epsilon_remaining.as_deref().map(short) },
            ChargeOutcome::Denied { reason, epsilon_remaining, delta_remaining } => ChargeOutcome::Denied {
                reason: short_reason(reason),
                epsilon_remaining: epsilon_remaining.as_deref().map(short),
                delta_remaining: delta_remaining.as_deref().map(short),
            },
            ChargeOutcome::Failed { message } => ChargeOutcome::Failed { message: shortened(message, max / 2) },
        };
        shortened.to_bytes()
    }
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        serde_json::from_slice(b).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_with_amounts_of_hundreds_of_digits_fits_its_slot() {
        let tiny = format!("0.{}5", "0".repeat(322));
        let out = ChargeOutcome::Denied {
            reason: format!("cap:{tiny}"),
            epsilon_remaining: Some(tiny.clone()),
            delta_remaining: Some(tiny.clone()),
        };
        assert!(out.to_bytes().len() > 512);
        let b = out.to_bytes_within(512);
        assert!(b.len() <= 512, "{}", b.len());
        match ChargeOutcome::from_bytes(&b) {
            Some(ChargeOutcome::Denied { reason, epsilon_remaining, delta_remaining }) => {
                assert_eq!(reason, "cap:5e-323");
                assert_eq!(epsilon_remaining.as_deref(), Some("5e-323"));
                assert_eq!(delta_remaining.as_deref(), Some("5e-323"));
            }
            other => panic!("{other:?}"),
        }
        // an answer that fits is kept exact
        let small = ChargeOutcome::Denied { reason: "exhausted".into(), epsilon_remaining: Some("0.25".into()), delta_remaining: Some("0".into()) };
        assert_eq!(small.to_bytes_within(512), small.to_bytes());
    }

    #[test]
    fn mechanism_epsilon_never_exceeds_the_charged_decimal() {
        let mut x = 0.0123_f64;
        for i in 0..20_000 {
            x = (x * 1.618_033_988_749_895 + 0.000_137 * i as f64).fract() * 10f64.powi((i % 13) - 6);
            if !(1e-9..=1e6).contains(&x) {
                continue;
            }
            let dec = charged_decimal(x);
            assert_eq!(dec.parse::<f64>().unwrap(), x, "round trip of {dec}");
            // The round trip is the proof: parsing is monotone, so a decimal at or below
            // mechanism_epsilon(x) < x could not read back as x.
            assert!(mechanism_epsilon(x) < x);
            assert!(dec.parse::<f64>().unwrap() > mechanism_epsilon(x));
        }
        assert_eq!(charged_decimal(0.1), "0.1");
        assert_eq!(charged_decimal(1e6), "1000000");
        assert_eq!(charged_decimal(1e-9), "0.000000001");
    }

    #[test]
    fn request_roundtrip_and_truncation() {
        let r = ChargeRequest {
            role: 10,
            database_user: "alice".into(),
            unlimited: false,
            query_id: -5,
            query_text: "SELECT dp_count(*) FROM t -- ".to_string() + &"é".repeat(3000),
            releases: vec![ReleaseRecord {
                aggregate: "dp_count(*)".into(),
                mechanism: "discrete_laplace".into(),
                sensitivity: 1.0,
                noise_scale: 2.0,
                epsilon: "0.5".into(),
                delta: "0".into(),
                details: "{}".into(),
            }],
            kind: RequestKind::Charge,
            reused: vec![Reuse { execution: "1-2-3".into(), epsilons: vec!["0.5".into()], deltas: vec!["0".into()] }],
        };
        let b = r.to_bytes_within(100_000).unwrap();
        assert_eq!(ChargeRequest::from_bytes(&b).unwrap(), r);
        let b = r.to_bytes_within(1024).unwrap();
        assert!(b.len() <= 1024);
        let back = ChargeRequest::from_bytes(&b).unwrap();
        // the beginning and the end are kept, the middle is marked as cut
        let (head, rest) = back.query_text.split_once(" […").unwrap();
        let (marker, tail) = rest.split_once("…] ").unwrap();
        assert!(r.query_text.starts_with(head) && r.query_text.ends_with(tail), "{}", back.query_text);
        let cut: usize = marker.trim_end_matches(" bytes cut").parse().unwrap();
        assert_eq!(head.len() + cut + tail.len(), r.query_text.len());
        assert!(back.query_text.len() < r.query_text.len());
        assert_eq!(back.releases, r.releases);
        let f = ChargeRequest { kind: RequestKind::Forfeit { sqlstate: "22012".into() }, releases: vec![], ..r.clone() };
        assert_eq!(ChargeRequest::from_bytes(&f.to_bytes_within(100_000).unwrap()).unwrap(), f);
        let o = ChargeOutcome::Denied { reason: "exhausted".into(), epsilon_remaining: Some("0.3".into()), delta_remaining: None };
        assert_eq!(ChargeOutcome::from_bytes(&o.to_bytes()).unwrap(), o);
    }
}

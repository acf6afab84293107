//! Every page and endpoint of the dashboard, declared once: its path, its title in the
//! navigation, who may open it, whether its answers are cached, whether the 404 page offers
//! it, and the keys its JSON twin always has. The router, the navigation, the 404 choices,
//! the role refusals, the page cache and the tests' page lists are all read from [`PAGES`].
//!
//! Adding a page is one module under `pages/` and one line here.

use axum::routing::{MethodRouter, get, post};

use super::{AppState, auth, metrics, pages};
use crate::domain::users::Role;

/// Who may open a path (for a POST, who may send it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// Anyone, signed in or not.
    Public,
    /// Every signed-in user.
    Everyone,
    /// Every role but client users, who see only their own client pages.
    Staff,
    /// Roles that see every client: not managers, not client users.
    Unscoped,
    Admin,
}

impl Who {
    pub fn allows(self, role: Role) -> bool {
        match self {
            Who::Public | Who::Everyone => true,
            Who::Staff => role != Role::Client,
            Who::Unscoped => !role.is_scoped(),
            Who::Admin => role == Role::Admin,
        }
    }
}

/// What a user the rule refuses is told, and which pages they are offered instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub message: &'static str,
    /// Paths to offer; none when empty, unless `own_pages`.
    pub choices: &'static [&'static str],
    /// Offer the viewer's own client pages.
    pub own_pages: bool,
}

/// Told to a client user on a fleet page.
pub const OWN_PAGES_ONLY: Refused =
    Refused { message: "Your account shows only your own client pages.", choices: &[], own_pages: true };

/// Who may, and what the others are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub who: Who,
    pub refused: Refused,
}

const fn rule(who: Who, refused: Refused) -> Rule {
    Rule { who, refused }
}

const PUBLIC: Rule = rule(Who::Public, OWN_PAGES_ONLY);
const EVERYONE: Rule = rule(Who::Everyone, OWN_PAGES_ONLY);
const STAFF: Rule = rule(Who::Staff, OWN_PAGES_ONLY);

/// One path of the dashboard.
pub struct Page {
    /// The route, in axum's syntax (`{name}` is one segment).
    pub path: &'static str,
    /// Its entry in the main navigation, and the name pages mark as the current one.
    pub nav: Option<(&'static str, &'static str)>,
    /// Who may GET it, and what the others are told.
    pub get: Rule,
    /// Who may POST to it (whether or not it takes a POST), and what the others are told.
    pub post: Rule,
    /// The rules hold for every path below it too (`/admin/…`, `/invoices/…`).
    pub below: bool,
    /// GET answers are kept in the page cache until the data changes.
    pub cached: bool,
    /// Offered on the 404 page.
    pub listed: bool,
    /// The keys its JSON twin always has (the interface scripts read).
    pub json: &'static [&'static str],
    /// The keys of its JSON twin as a client user gets it (its own view), where that differs.
    pub client_json: &'static [&'static str],
    /// Its handlers.
    pub routes: fn() -> MethodRouter<AppState>,
}

const fn page(path: &'static str, routes: fn() -> MethodRouter<AppState>) -> Page {
    Page {
        path,
        nav: None,
        get: EVERYONE,
        post: EVERYONE,
        below: false,
        cached: false,
        listed: false,
        json: &[],
        client_json: &[],
        routes,
    }
}

const fn dashboard(
    path: &'static str,
    nav: (&'static str, &'static str),
    json: &'static [&'static str],
    routes: fn() -> MethodRouter<AppState>,
) -> Page {
    Page { nav: Some(nav), get: STAFF, post: STAFF, cached: true, listed: true, json, ..page(path, routes) }
}

const DATA_REFUSED: Refused = Refused {
    message: "The Data page shows the whole bill; your account does not.",
    choices: &[],
    own_pages: false,
};
const ALERTS_REFUSED: Refused = Refused {
    message: "Alerts name every client and the whole bill; your account does not.",
    choices: &[],
    own_pages: false,
};
const ADMIN_REFUSED: Refused =
    Refused { message: "Only administrators may open the admin pages.", choices: &[], own_pages: false };
const ISSUE_REFUSED: Refused = Refused {
    message: "Your account does not issue, adjust or void invoices.",
    choices: &[],
    own_pages: false,
};
const DRAFT_REFUSED: Refused = Refused {
    message: "Your account sees issued invoices only, not drafts.",
    choices: &["/invoices"],
    own_pages: false,
};

/// Finance and administrators, and managers when an administrator lets them: the handlers
/// check which (`pages::invoices::may_issue`), since it is a setting.
const ISSUERS: Rule = rule(Who::Staff, ISSUE_REFUSED);
const ADMINS: Rule = rule(Who::Admin, ADMIN_REFUSED);

/// The dashboard, in the navigation's order.
pub static PAGES: &[Page] = &[
    dashboard("/", ("overview", "Overview"), &["bill", "cards", "opportunities", "period", "trend"], || {
        get(pages::overview)
    }),
    dashboard("/costs", ("costs", "Costs"), &["accounts", "costs", "period"], || get(pages::costs)),
    dashboard("/clients", ("clients", "Clients"), &["accounts", "clients", "period"], || get(pages::clients)),
    Page {
        cached: true,
        below: true,
        json: &[
            "breakdown",
            "charge_basis",
            "client",
            "markup_rate",
            "months",
            "period",
            "share_policy",
            "total_cost",
            "workloads",
        ],
        // "Your charges": what the client is charged, never the agency's cost or markup.
        client_json: &["breakdown", "client", "months", "period", "total_charged", "workloads"],
        ..page("/clients/{client}", || get(pages::client))
    },
    dashboard(
        "/gpus",
        ("gpus", "GPUs"),
        &["accounts", "gpu", "heatmap", "period", "utilization", "worst_idle"],
        || get(pages::gpus),
    ),
    dashboard("/inference", ("inference", "Inference"), &["inference", "period"], || get(pages::inference)),
    dashboard("/savings", ("savings", "Savings"), &["opportunities", "period", "realized"], || {
        get(pages::savings)
    }),
    // Everyone: a client user reads its own GPU-hours' forecast (the page narrows itself).
    Page {
        nav: Some(("plan", "Plan")),
        cached: true,
        listed: true,
        json: &[
            "advice",
            "alerts",
            "backtest",
            "capacity",
            "commitments",
            "forecast",
            "history_end",
            "horizon_months",
            "plans",
            "series",
            "spot",
        ],
        client_json: &["alerts", "backtest", "forecast", "history_end", "horizon_months", "plans", "series"],
        ..page("/plan", || get(pages::plan))
    },
    Page {
        nav: Some(("invoices", "Invoices")),
        post: ISSUERS,
        below: true,
        ..page("/invoices", || get(pages::invoices))
    },
    Page {
        get: rule(Who::Staff, DRAFT_REFUSED),
        post: ISSUERS,
        ..page("/invoices/draft", || get(pages::invoice_draft))
    },
    Page { post: ISSUERS, ..page("/invoices/issue", || post(pages::invoice_issue)) },
    Page { post: ISSUERS, ..page("/invoices/adjust", || post(pages::invoice_adjust)) },
    Page { post: ISSUERS, ..page("/invoices/issue-month", || post(pages::invoice_issue_month)) },
    Page { post: ISSUERS, ..page("/invoices/billing", || post(pages::invoice_billing)) },
    Page { post: ISSUERS, ..page("/invoices/terms", || post(pages::invoice_terms)) },
    Page { post: ISSUERS, ..page("/invoices/{number}", || get(pages::invoice)) },
    Page { post: ISSUERS, ..page("/invoices/{number}/credit", || post(pages::invoice_credit)) },
    Page { post: ISSUERS, ..page("/invoices/{number}/{format}", || get(pages::invoice_export)) },
    Page {
        nav: Some(("alerts", "Alerts")),
        get: rule(Who::Unscoped, ALERTS_REFUSED),
        post: rule(Who::Unscoped, ALERTS_REFUSED),
        json: &["alert_list", "alerts", "period"],
        ..page("/alerts", || get(pages::alerts))
    },
    Page {
        nav: Some(("data", "Data")),
        get: rule(Who::Unscoped, DATA_REFUSED),
        post: rule(Who::Unscoped, DATA_REFUSED),
        cached: true,
        listed: true,
        json: &[
            "bill",
            "bills",
            "cross_check",
            "database",
            "freshness",
            "ingest_runs",
            "pending_compute",
            "periods",
            "pipeline",
            "reconciliation",
        ],
        ..page("/data", || get(pages::data))
    },
    Page { get: PUBLIC, post: PUBLIC, ..page("/login", || get(auth::login_page).post(auth::login)) },
    page("/logout", || post(auth::logout)),
    Page { get: PUBLIC, post: PUBLIC, ..page("/setup", || get(auth::setup_page).post(auth::setup)) },
    page("/account", || get(auth::account)),
    page("/account/password", || post(auth::change_password)),
    Page { get: ADMINS, post: ADMINS, below: true, ..page("/admin", || get(auth::admin)) },
    Page { get: ADMINS, post: ADMINS, ..page("/admin/users", || post(auth::change_user)) },
    Page { get: ADMINS, post: ADMINS, ..page("/admin/invoicing", || post(pages::invoice_settings)) },
    Page { get: PUBLIC, post: PUBLIC, ..page("/healthz", || get(super::healthz)) },
    // Behind its own bearer token (`serve --metrics-token`), checked before sign-in.
    Page { get: PUBLIC, post: PUBLIC, ..page("/metrics", || get(metrics::exposition)) },
    Page { get: PUBLIC, post: PUBLIC, ..page("/static/style.css", || get(super::stylesheet)) },
    Page { get: PUBLIC, post: PUBLIC, ..page("/static/htmx.min.js", || get(super::htmx)) },
];

/// The main navigation: (path, name, title).
pub fn nav() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    PAGES.iter().filter_map(|p| p.nav.map(|(name, title)| (p.path, name, title)))
}

/// The pages a 404 offers.
pub fn listed() -> Vec<String> {
    PAGES.iter().filter(|p| p.listed).map(|p| p.path.to_string()).collect()
}

/// Whether `pattern` (axum's syntax) matches `path` (`below`: or a path under it): the same
/// segments, `{name}` any one.
fn matches(pattern: &str, path: &str, below: bool) -> bool {
    let (mut a, mut b) = (pattern.split('/'), path.split('/'));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (None, Some(_)) => return below,
            (Some(p), Some(s)) if p == s || p.starts_with('{') => continue,
            _ => return false,
        }
    }
}

/// The page that answers `path`: its own entry (a literal path before a pattern, as the
/// router chooses), else the nearest entry above it whose rules hold `below`.
pub fn find(path: &str) -> Option<&'static Page> {
    PAGES
        .iter()
        .find(|p| p.path == path)
        .or_else(|| PAGES.iter().find(|p| p.path.contains('{') && matches(p.path, path, false)))
        .or_else(|| {
            PAGES.iter().filter(|p| p.below && matches(p.path, path, true)).max_by_key(|p| p.path.len())
        })
}

/// Whether anyone may open `path` without signing in.
pub fn is_public(path: &str) -> bool {
    // Browsers ask for a favicon on their own; there is none, and it needs no sign-in to say so.
    path == "/favicon.ico" || PAGES.iter().any(|p| p.path == path && p.get.who == Who::Public)
}

/// Whether GET answers for `path` are cached.
pub fn is_cached(path: &str) -> bool {
    find(path).is_some_and(|p| p.cached)
}

/// The router of every page, in [`PAGES`]' order.
pub fn routes() -> axum::Router<AppState> {
    PAGES.iter().fold(axum::Router::new(), |router, page| router.route(page.path, (page.routes)()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_find_their_page_a_literal_first_then_a_pattern_then_a_section() {
        assert_eq!(find("/invoices/draft").unwrap().path, "/invoices/draft");
        assert_eq!(find("/invoices/GL-2026-0001").unwrap().path, "/invoices/{number}");
        assert_eq!(find("/invoices/GL-2026-0001/pdf").unwrap().path, "/invoices/{number}/{format}");
        assert_eq!(find("/invoices/a/b/c").unwrap().path, "/invoices");
        assert_eq!(find("/admin/anything").unwrap().path, "/admin");
        assert_eq!(find("/clients/acme").unwrap().path, "/clients/{client}");
        // A client page's rules hold for what is under it (a 404, not a refusal).
        assert_eq!(find("/clients/acme/x").unwrap().path, "/clients/{client}");
        assert!(find("/administrator").is_none());
        assert!(find("/nowhere").is_none());
    }

    #[test]
    fn the_navigation_and_the_404_choices_come_in_the_registry_order() {
        let nav: Vec<&str> = nav().map(|(path, _, _)| path).collect();
        assert_eq!(
            nav,
            [
                "/",
                "/costs",
                "/clients",
                "/gpus",
                "/inference",
                "/savings",
                "/plan",
                "/invoices",
                "/alerts",
                "/data"
            ]
        );
        assert_eq!(
            listed(),
            ["/", "/costs", "/clients", "/gpus", "/inference", "/savings", "/plan", "/data"]
        );
    }

    #[test]
    fn each_path_is_declared_once() {
        let mut paths: Vec<&str> = PAGES.iter().map(|p| p.path).collect();
        paths.sort_unstable();
        let before = paths.len();
        paths.dedup();
        assert_eq!(paths.len(), before);
    }
}

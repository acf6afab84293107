//! Users with a role and, for managers and client users, the clients they may see; their
//! sessions; the append-only audit log and the refused sign-ins. The roles' powers are in
//! [`crate::auth`].

use serde::Serialize;

/// What a user may see and do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Finance,
    Manager,
    Viewer,
    Client,
}

impl Role {
    pub const ALL: [Role; 5] = [Role::Admin, Role::Finance, Role::Manager, Role::Viewer, Role::Client];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Finance => "finance",
            Role::Manager => "manager",
            Role::Viewer => "viewer",
            Role::Client => "client",
        }
    }

    /// Whether the role is limited to the clients assigned to the user.
    pub fn is_scoped(self) -> bool {
        matches!(self, Role::Manager | Role::Client)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(text: &str) -> Result<Role, String> {
        Role::ALL.into_iter().find(|r| r.as_str() == text).ok_or_else(|| {
            format!("unknown role {text:?}: expected one of admin, finance, manager, viewer, client")
        })
    }
}

/// A stored account.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// The clients a manager or client user may see (empty for the other roles).
    pub clients: Vec<String>,
    /// An argon2id PHC string; empty for users who sign in only through a trusted proxy.
    #[serde(skip)]
    pub password_hash: String,
    pub disabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

impl User {
    /// A new, enabled user, made now (the store gives it its id).
    pub fn new(name: &str, role: Role, clients: Vec<String>, password_hash: String) -> User {
        let now = chrono::Utc::now().timestamp();
        User {
            id: 0,
            name: name.trim().to_string(),
            role,
            clients,
            password_hash,
            disabled: false,
            created_at: now,
            updated_at: now,
        }
    }
}

impl std::fmt::Display for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.role)
    }
}

/// A server-side session. The cookie carries a random token; the store keeps only its hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub token_hash: String,
    pub user_id: i64,
    /// The session's CSRF token, sent back in every form.
    pub csrf: String,
    pub created_at: i64,
    pub last_seen: i64,
    pub address: String,
}

/// One line of the append-only audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    pub id: i64,
    /// UTC epoch seconds.
    pub at: i64,
    pub username: String,
    pub address: String,
    /// `login`, `login_failed`, `logout`, `download`, `user_added`, `user_changed`,
    /// `password_changed`, `settings_changed`.
    pub action: String,
    pub detail: String,
    /// How many times it happened: downloads are rolled up per user, page and hour; every
    /// other entry is one.
    pub count: i64,
}

/// Which audit entries to read: a page of those of a user and an action (each when given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub username: String,
    pub action: String,
    pub offset: i64,
    pub limit: i64,
}

impl AuditQuery {
    /// The newest `limit` entries.
    pub fn newest(limit: i64) -> AuditQuery {
        AuditQuery { limit, ..AuditQuery::default() }
    }
}

/// Refused sign-ins of one account from one address in one window (they are counted, not
/// logged one by one).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoginFailures {
    pub window_start: i64,
    pub username: String,
    pub address: String,
    pub failures: i64,
    pub last_at: i64,
}

/// A user or client name as every page, file and report can show it: not empty, at most 64
/// characters, no control character, no space at either end, and not in parentheses (those
/// are the names gpuledger gives what is no client, such as `(house)`).
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let problem = if name.trim().is_empty() {
        "is empty"
    } else if name.chars().count() > 64 {
        "is longer than 64 characters"
    } else if name.chars().any(char::is_control) {
        "holds a control character"
    } else if name.trim() != name {
        "begins or ends with a space"
    } else if name.starts_with('(') {
        "begins with '(' (kept for gpuledger's own names, such as (house))"
    } else {
        return Ok(());
    };
    Err(format!("a {what} name {problem}: {name:?}"))
}

impl AuditEntry {
    /// An entry for now (the store gives it its id).
    pub fn new(username: &str, address: &str, action: &str, detail: &str) -> AuditEntry {
        AuditEntry {
            id: 0,
            at: chrono::Utc::now().timestamp(),
            username: username.into(),
            address: address.into(),
            action: action.into(),
            detail: detail.into(),
            count: 1,
        }
    }
}

/// A new user's name: a [`check_name`] one in ASCII letters, digits, punctuation and inner
/// spaces only (another script's letters pass for Latin ones: `аdmin` with a Cyrillic `а`,
/// and direction or zero-width characters change how a name reads), and no other user's name
/// in another case (`ADMIN` beside `admin`).
pub fn check_new_user_name(name: &str, existing: &[User]) -> Result<(), String> {
    check_name("user", name)?;
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_graphic() || *c == ' ')) {
        return Err(format!(
            "a user name holds {c:?} (U+{:04X}): user names are ASCII letters, digits and punctuation, \
             so that none can pass for another: {name:?}",
            u32::from(c)
        ));
    }
    if let Some(other) = existing.iter().find(|u| u.name.eq_ignore_ascii_case(name)) {
        return Err(format!(
            "a user named {:?} already exists (user names are compared without case)",
            other.name
        ));
    }
    Ok(())
}

/// Refuses a change to `changed` (stored among `users` under its name) that leaves no
/// active administrator: nobody could then manage users from the pages.
pub fn check_an_admin_remains(users: &[User], changed: &User) -> Result<(), String> {
    let active_admin = |u: &User| u.role == Role::Admin && !u.disabled;
    let was = users.iter().any(|u| u.name == changed.name && active_admin(u));
    let others = users.iter().filter(|u| u.name != changed.name && active_admin(u)).count();
    if was && !active_admin(changed) && others == 0 {
        return Err(format!(
            "{} is the only active administrator: make another user an administrator first",
            changed.name
        ));
    }
    Ok(())
}

/// Clients named in a comma-separated list, trimmed, without empties or repeats.
pub fn client_list(text: &str) -> Vec<String> {
    let mut clients: Vec<String> =
        text.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect();
    clients.sort();
    clients.dedup();
    clients
}

/// Managers and client users need clients; the other roles see everything and take none.
pub fn check_clients(user: &User) -> Result<(), String> {
    match (user.role.is_scoped(), user.clients.is_empty()) {
        (true, true) => Err(format!("a {} needs --clients (the clients they may see)", user.role)),
        (false, false) => Err(format!("a {} sees every client: give no --clients", user.role)),
        _ => Ok(()),
    }
}

/// A scoped user's clients must be clients gpuledger knows (`known`: with terms, a budget, a
/// mapping rule, billing details or a chargeback line): a misspelt one would show its user
/// nothing, or whatever a client of that name becomes later.
pub fn check_clients_exist(user: &User, known: &std::collections::BTreeSet<String>) -> Result<(), String> {
    let unknown: Vec<&str> =
        user.clients.iter().filter(|c| !known.contains(*c)).map(String::as_str).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let listed = if known.is_empty() {
        "none yet".to_string()
    } else {
        known.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
    };
    Err(format!(
        "no client named {}: the clients gpuledger knows are {listed} (`gpuledger clients set NAME` adds one)",
        unknown.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>().join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, role: Role) -> User {
        User::new(name, role, Vec::new(), String::new())
    }

    #[test]
    fn a_client_user_sees_only_clients_that_exist() {
        let known: std::collections::BTreeSet<String> = ["acme", "globex"].map(String::from).into();
        let mut dana = User::new("dana", Role::Client, vec!["acme".into()], String::new());
        assert_eq!(check_clients_exist(&dana, &known), Ok(()));
        dana.clients = vec!["acme".into(), "acme2".into()];
        assert_eq!(
            check_clients_exist(&dana, &known).unwrap_err(),
            "no client named \"acme2\": the clients gpuledger knows are acme, globex \
             (`gpuledger clients set NAME` adds one)"
        );
        let nobody = std::collections::BTreeSet::new();
        assert!(check_clients_exist(&dana, &nobody).unwrap_err().contains("knows are none yet"));
    }

    #[test]
    fn a_new_user_name_cannot_pass_for_another() {
        let existing = [user("admin", Role::Admin)];
        assert!(check_new_user_name("dana", &existing).is_ok());
        assert!(check_new_user_name("dana.smith@example.com", &existing).is_ok());
        let said = check_new_user_name("ADMIN", &existing).unwrap_err();
        assert!(said.contains("\"admin\" already exists"), "{said}");
        // A Cyrillic а, a right-to-left override, a zero-width space.
        for (name, code) in [("аdmin", "U+0430"), ("\u{202e}nimda", "U+202E"), ("ad\u{200b}min", "U+200B")] {
            let said = check_new_user_name(name, &existing).unwrap_err();
            assert!(said.contains(code), "{name:?}: {said}");
        }
    }

    #[test]
    fn the_only_active_administrator_cannot_step_down() {
        let users = [user("admin", Role::Admin), user("fin", Role::Finance)];
        let demoted = User { role: Role::Finance, ..users[0].clone() };
        let disabled = User { disabled: true, ..users[0].clone() };
        assert!(check_an_admin_remains(&users, &demoted).unwrap_err().contains("only active administrator"));
        assert!(check_an_admin_remains(&users, &disabled).is_err());
        // With another active administrator, either may go; a disabled one does not count.
        let second = [users[0].clone(), user("root", Role::Admin)];
        assert!(check_an_admin_remains(&second, &demoted).is_ok());
        let asleep = [users[0].clone(), User { disabled: true, ..user("root", Role::Admin) }];
        assert!(check_an_admin_remains(&asleep, &demoted).is_err());
        // Changing someone else is never refused for it.
        let promoted = User { role: Role::Admin, ..users[1].clone() };
        assert!(check_an_admin_remains(&users, &promoted).is_ok());
    }
}
